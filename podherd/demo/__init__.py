"""The demo (`podherd demo`): a cluster to defragment and a node to drain, carried out by the pipeline's four
services on real NATS and Redis, with the watchdog looking on. What it runs ships; it shows Podherd work."""
