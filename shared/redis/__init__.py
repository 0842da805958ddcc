"""Redis access: the client, and the barrier that holds a write until replicas have it."""
