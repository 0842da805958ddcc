"""kubesim: a Kubernetes API server with simulated control loops, for the demo, tests and benchmarks."""

from pathlib import Path

# A stand-in for the Prometheus Operator's ServiceMonitor CRD, for a kubesim that is to take deploy/ whole.
SERVICE_MONITOR_CRD = Path(__file__).resolve().parent / "servicemonitor-crd.yaml"
