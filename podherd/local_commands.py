"""The commands that run things on this machine: `podherd sim` (kubesim, or the real control plane) and
`podherd demo`, their arguments and their entry points."""

from __future__ import annotations

import argparse
from typing import Any

from kubesim.entry import SCENARIOS
from podherd import arguments


def _cmd_demo(args: argparse.Namespace) -> int:
    from podherd.demo.run import DemoOptions, run_demo

    return run_demo(
        DemoOptions(
            keep=args.keep,
            kubeconfig=args.kubeconfig,
            nats_url=args.nats_url,
            redis_url=args.redis_url,
            prefix=args.prefix,
            timeout=args.timeout,
            workdir=args.workdir,
            summary_json=args.summary_json,
            in_cluster=args.in_cluster,
            scenario=args.scenario,
            engine=args.engine,
        )
    )


def _cmd_sim(args: argparse.Namespace) -> int:
    from podherd.sim_command import run_sim

    return run_sim(args)


def add_sim_parser(sub: Any) -> None:
    sim = sub.add_parser("sim", help="run kubesim, a Kubernetes API server with simulated control loops")
    sim.add_argument(
        "--engine",
        choices=("kubesim", "real"),
        default="kubesim",
        help="kubesim (embedded, the default) or real: etcd, kube-apiserver, kube-controller-manager,"
        " koord-scheduler and kwok built from Go modules (`make controlplane`; needs Go)",
    )
    sim.add_argument(
        "--scenario",
        help=f"one of {', '.join(sorted(SCENARIOS))}; generate:NODES:PODS (a large cluster); or a YAML file",
    )
    sim.add_argument("--port", type=arguments.port, default=6443, help="port to serve on (0: any free port)")
    sim.add_argument("--host", default="127.0.0.1", help="address to listen on")
    sim.add_argument(
        "--kubeconfig", type=arguments.writable_file, help="write a kubeconfig for the simulator here"
    )
    sim.add_argument(
        "--advertise-url", help="the server URL the kubeconfig names (default: where it listens)"
    )
    sim.add_argument(
        "--evict-in-background",
        action="store_true",
        help="request-evict-only pods' evictions trigger an evacuation (a webhook's 429, KEP-1397)",
    )
    sim.add_argument("--no-events", action="store_true", help="do not record Kubernetes Events")
    sim.add_argument(
        "--min-request-timeout",
        type=float,
        default=1800.0,
        help="a watch without timeoutSeconds lasts 1 to 2 times this many seconds (kube-apiserver's flag)",
    )
    sim.add_argument(
        "--no-controllers",
        action="store_true",
        help="a static cluster: no scheduler, workload controllers, kubelet or PDB controller",
    )
    sim.add_argument(
        "--run-podherd",
        action="store_true",
        help="the kubelet runs pods of Podherd's image as processes (needs root): `kubectl apply -k deploy/`",
    )
    sim.add_argument(
        "--service",
        action="append",
        default=[],
        metavar="NS/NAME:PORT=HOST:PORT[,HOST:PORT]",
        help="a Service such pods reach by name, and the servers behind it (repeatable)",
    )
    sim.add_argument(
        "--podherd-accounts",
        metavar="DIR",
        type=arguments.writable_dir,
        help="install Podherd's CRDs and roles and write DIR/kubeconfig-<service> with each service's"
        " ServiceAccount token, the gate's and the planner's too (compose; mode 0600)",
    )
    sim.set_defaults(func=_cmd_sim)


def add_demo_parser(sub: Any) -> None:
    demo = sub.add_parser("demo", help="a defragmentation end to end on the embedded default")
    demo.add_argument("--keep", action="store_true", help="leave everything running and print the addresses")
    demo.add_argument(
        "--kubeconfig",
        type=arguments.readable_file,
        help="an existing cluster to defragment (default: kubesim, fragmented)",
    )
    demo.add_argument("--nats-url", help="an existing NATS (default: $NATS_URL, else a local nats-server)")
    demo.add_argument("--redis-url", help="an existing Redis (default: $REDIS_URL, else a local server)")
    demo.add_argument("--prefix", default="podherd", help="NATS subject and Redis key prefix")
    demo.add_argument(
        "--timeout", type=arguments.seconds, default=180.0, help="how long to wait for the moves (3m)"
    )
    demo.add_argument(
        "--workdir",
        type=arguments.writable_dir,
        help="where config, kubeconfigs and service logs go (default: a temp dir)",
    )
    demo.add_argument("--summary-json", help="also write the summary here as JSON")
    demo.add_argument(
        "--in-cluster",
        action="store_true",
        help="install Podherd with `kubectl apply -k deploy/` on kubesim, whose kubelet runs its pods"
        " (needs root and kubectl)",
    )
    demo.add_argument(
        "--engine",
        choices=("kubesim", "real"),
        default="kubesim",
        help="the cluster: kubesim (embedded, the default) or the real control plane (`make controlplane`)",
    )
    demo.add_argument(
        "--scenario",
        choices=("defragment", "maintenance", "interceptor", "rebalance"),
        default="defragment",
        help="defragment (default): make room for a pending pod; maintenance: drain a node, plainly"
        " (kubectl's algorithm) and by Podherd, side by side; interceptor: kubectl drain itself, without"
        " and with the admission gate, side by side; rebalance: a skewed 50-node cluster rebalanced as the"
        " descheduler does it and by Podherd, side by side, with pictures",
    )
    demo.set_defaults(func=_cmd_demo)
