"""`podherd demo --scenario interceptor`: `kubectl drain` (the real one, unchanged) of `node-1` on kubesim's
`maintenance` cluster, twice:

1. without Podherd: kubectl evicts what the budgets allow and retries what they refuse until its
   `--timeout` (4 s here), then gives up;
2. with the admission gate and the pipeline's four services, the namespace opted in
   (`podherd.io/evacuate=true`): every eviction kubectl asks for becomes a migration, room reserved first
   (Surge where a workload cannot spare its pod), and kubectl retries until each pod is gone.

Both measured as the maintenance demo measures them (`availability`, from pod events), side by side. The
command fails only if the gated drain did not empty the node or took a workload to no Ready replica.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import io
import json
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

import yaml

from kubesim.sim import SimHandle
from podherd.demo.engines import kubectl_for, start_cluster
from podherd.demo.maintenance import NODE, _agent, _core, _measured, side_by_side
from podherd.demo.services_up import KeptUp, keep_up, stay_up
from podherd.harness.gate import start_gate
from shared.api.names import LABEL_EVACUATE
from shared.config.loader import config_from_dict
from shared.kube.client import KubeClient

SURGE = {"singleReplicaDeployments": True, "zeroDisruptionDeployments": True}
KUBECTL_TIMEOUT = 4.0  # seconds kubectl drain retries, without the gate, what the budgets refuse


def kubectl_drain(kubeconfig: Path, timeout: float, *, engine: str) -> dict[str, Any]:
    """`kubectl drain NODE --ignore-daemonsets --timeout`: its exit code, time and the pods it gave up on."""
    binary = kubectl_for(engine)
    started = time.monotonic()
    argv = [
        binary,
        "--kubeconfig",
        str(kubeconfig),
        "drain",
        NODE,
        "--ignore-daemonsets",
        f"--timeout={timeout:.0f}s",
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout + 60, check=False)
    said = done.stdout + done.stderr
    refused = {
        line.split('"')[1]: line.split(": ", 1)[-1]
        for line in said.splitlines()
        if line.startswith("error when evicting pods/")
    }
    return {
        "exit": done.returncode,
        "seconds": round(time.monotonic() - started, 1),
        "gave_up_on": refused if done.returncode else {},
        "retries": sum(1 for line in said.splitlines() if "will retry after 5s" in line),
    }


def plain_run(out: TextIO, engine: str) -> dict[str, Any]:
    with contextlib.ExitStack() as stack:
        sim = start_cluster(engine, "maintenance")
        stack.callback(sim.stop)
        _agent(sim.kubeconfig)
        flags = f"--ignore-daemonsets --timeout={KUBECTL_TIMEOUT:.0f}s"
        print(f"\n1. kubectl drain {NODE} {flags}, no gate", file=out)
        measured = _measured(
            _core(sim.kubeconfig), lambda: kubectl_drain(sim.kubeconfig, KUBECTL_TIMEOUT, engine=engine)
        )
        left = measured["left_on_node"]  # what kubectl gave up on: refused until its timeout, still there
        measured["gave_up_on"] = {pod: why for pod, why in measured["gave_up_on"].items() if pod in left}
        print(f"   kubectl drain exited {measured['exit']} after {measured['seconds']}s", file=out)
        for pod, why in measured["gave_up_on"].items():
            print(f"   gave up on {pod}: {why}", file=out)
        return measured


def gated_run(
    opts: Any, out: TextIO, *, processes: Callable[..., Any]
) -> tuple[dict[str, Any], dict[str, int], KeptUp | None]:
    workdir = Path(opts.workdir or tempfile.mkdtemp(prefix="podherd-interceptor-"))
    workdir.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        services = processes(opts, stack, workdir, scenario="maintenance")
        services.config_document.setdefault("migrationController", {})["surge"] = SURGE
        (workdir / "podherd.yaml").write_text(yaml.safe_dump(services.config_document))
        config = config_from_dict(services.config_document)
        kube = KubeClient.from_config(config.kubernetes)
        stack.callback(kube.close)
        services.start(kube)
        handle: SimHandle = services.handle
        gate = start_gate(handle, workdir, arguments=services.config_document["migrationController"])
        stack.callback(gate.processes.stop_all)
        opt_in = {"metadata": {"labels": {LABEL_EVACUATE: "true"}}}
        kube.request(
            "PATCH", "/api/v1/namespaces/default", body=opt_in, content_type="application/merge-patch+json"
        )
        _agent(services.kubeconfig)
        print(
            f"\n2. the same kubectl drain {NODE} --ignore-daemonsets, through the admission gate and the four"
            " services (namespace default labelled podherd.io/evacuate=true)",
            file=out,
        )
        measured = _measured(
            _core(services.kubeconfig),
            lambda: kubectl_drain(services.kubeconfig, opts.timeout, engine=opts.engine),
        )
        print(
            f"   kubectl drain exited {measured['exit']} after {measured['seconds']}s, told 429 and retrying "
            f"{measured['retries']} times while the pods moved",
            file=out,
        )
        codes = {} if opts.keep else {**services.stop(kube), **gate.processes.stop_all()}
        kept = keep_up(opts.keep, stack, services, workdir=workdir)
    return measured, codes, kept


def run_interceptor(opts: Any, out: TextIO, *, processes: Callable[..., Any]) -> int:
    """`processes(opts, stack, workdir, scenario=)` starts kubesim, NATS, Redis and the pipeline's four
    services as the defragmentation demo does. The two drains run at once, each on a cluster of its own
    (the plain one mostly waits on kubectl's retries), and are told in order."""
    print(f"draining {NODE} with kubectl, on two copies of the same cluster at once...", file=out, flush=True)
    told = [io.StringIO(), io.StringIO()]
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        alone = pool.submit(plain_run, told[0], opts.engine)
        try:
            gated, codes, kept_up = gated_run(opts, told[1], processes=processes)
        finally:
            plain = alone.result()
    for each in told:
        out.write(each.getvalue())
    print("", file=out)
    for line in side_by_side(plain, gated, names=("kubectl drain", "kubectl drain + gate")):
        print(line, file=out)
    if opts.summary_json:
        Path(opts.summary_json).write_text(
            json.dumps({"kubectl_drain": plain, "gated_drain": gated, "exit_codes": codes}, indent=2)
        )
    kept = all(m["lowest_ready"] > 0 for m in gated["apps"].values())
    ok = gated["drained"] and gated["exit"] == 0 and kept and all(c == 0 for c in codes.values())
    verdict = "no workload without a Ready replica" if kept else "a workload had no Ready replica"
    print(
        f"\nkubectl drain through the gate: {verdict}; node {NODE} "
        + ("drained" if gated["drained"] else "NOT drained"),
        file=out,
    )
    stay_up(kept_up, out)
    return 0 if ok else 1
