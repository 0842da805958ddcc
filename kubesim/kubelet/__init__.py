"""kubesim's kubelet: a node's pods run as processes (or as records only), with their environment,
files, network, probes and status, as the kubelet reports them."""
