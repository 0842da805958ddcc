"""kubesim's own tests: that the simulator says yes and no as a real API server, scheduler and kubelet do."""
