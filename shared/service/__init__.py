"""What runs a service: its configuration checks, logs, health and metrics endpoints, and the runner every
service's main goes through."""
