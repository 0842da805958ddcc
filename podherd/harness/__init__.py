"""Real servers and service processes for the demo, the tests and the benchmarks: NATS (a server, a
cluster, its faults), Redis (a server, a Sentinel topology, TLS) and the four services as processes. No
service imports them; `nats_faults` and `redis_topology` serve only the tests and the benchmarks."""
