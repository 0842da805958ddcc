"""The real engine: etcd, kube-apiserver, kube-controller-manager, koord-scheduler and kwok, built from Go
modules by `make controlplane` and run as local processes, for the same scenarios, tests and demos as
kubesim."""
