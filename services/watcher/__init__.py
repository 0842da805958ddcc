"""Watcher: the only bridge from the Kubernetes API to NATS (list+watch -> typed events on JetStream)."""
