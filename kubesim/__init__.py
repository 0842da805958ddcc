"""kubesim: a Kubernetes API server with simulated control loops, for the demo, tests and benchmarks."""
