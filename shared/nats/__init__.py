"""The NATS plumbing: the bus and its subjects, publishing, pulling and consuming, keyed work, the lease,
connections and their permissions."""
