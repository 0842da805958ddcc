"""Redis access: the client, the ACL users, and the barrier that holds a write until replicas have it."""
