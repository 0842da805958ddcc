"""`podherd demo` (what `make demo` runs), non-interactively, on the embedded default. The test reads the
summary's facts from the cluster the demo leaves up (`--keep`), not from what the demo prints."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

import pytest
import redis
from kubernetes import client, config

from tests.procs import alive, descendants

# One worker runs every test whose pods are real processes (the in-cluster demo's) and the demos.
pytestmark = [pytest.mark.integration, pytest.mark.e2e]


def read_until(stream: IO[str], marker: str, seen: list[str]) -> None:
    for line in stream:
        seen.append(line)
        if marker in line:
            return
    raise AssertionError("the demo ended before " + repr(marker) + ":\n" + "".join(seen[-40:]))


def intent_example() -> str:
    guide = (Path(__file__).resolve().parents[2] / "docs" / "guides" / "intents.md").read_text()
    block = guide[guide.index("<!-- intent-example -->") :]
    code = block[block.index("```python") + len("```python") :]
    return code[: code.index("```")]


def start_demo(tmp_path: Path, *more: str) -> subprocess.Popen[str]:
    """`podherd demo --keep` as started from a background job or `nohup`: SIGINT ignored, no stdin."""
    env = {k: v for k, v in os.environ.items() if k not in ("NATS_URL", "REDIS_URL", "KUBECONFIG")}
    demo = [sys.executable, "-m", "podherd", "demo", "--keep", "--workdir", str(tmp_path), *more]
    # As a non-interactive shell starts a background job: SIGINT ignored, inherited across exec (no
    # preexec_fn: Python between fork and exec can deadlock in a process with threads).
    return subprocess.Popen(
        ["sh", "-c", "trap '' INT; exec \"$@\"", "sh", *demo],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )


def until_kept_up(demo: subprocess.Popen[str], seen: list[str]) -> tuple[str, str]:
    """What the demo printed until it stays up (--keep), and the kubeconfig it says it left."""
    assert demo.stdout is not None
    read_until(demo.stdout, "Ctrl-C stops it all", seen)
    output = "".join(seen)
    kubeconfig = re.search(r"--keep: everything stays up\. KUBECONFIG=(\S+)", output)
    assert kubeconfig, output
    return output, kubeconfig.group(1)


def stop_demo(demo: subprocess.Popen[str], sig: signal.Signals) -> tuple[str, list[str]]:
    """Send `sig`; return what the demo printed after and the processes it started that outlived it."""
    started = descendants(demo.pid)
    demo.send_signal(sig)
    try:
        rest, _ = demo.communicate(timeout=60)
    finally:
        if demo.poll() is None:  # it did not stop: take everything down, then fail
            for pid, _start in started:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            demo.kill()
            demo.communicate()
    return rest, alive(started)


def test_demo_defragments_the_cluster_and_the_cluster_shows_it(tmp_path: Path) -> None:
    demo = start_demo(tmp_path)
    seen: list[str] = []
    try:
        output, kubeconfig = until_kept_up(demo, seen)
        plan = re.search(r"plan: empty (\S+) so that (\S+)/(\S+) can schedule", output)
        assert plan, output
        emptied, namespace, pending = plan.groups()

        api = config.new_client_from_config(config_file=kubeconfig)
        core: Any = client.CoreV1Api(api)  # models' fields all optional: the asserts read them
        custom: Any = client.CustomObjectsApi(api)
        group, version = "scheduling.koordinator.sh", "v1alpha1"
        listed = custom.list_cluster_custom_object(group, version, "podmigrationjobs")
        typo = next(j for j in listed["items"] if j["metadata"]["name"] == "demo-mistyped")
        jobs = {"items": [j for j in listed["items"] if j is not typo]}
        phases = [(j.get("status") or {}).get("phase") for j in jobs["items"]]
        assert phases and all(p == "Succeeded" for p in phases), phases
        assert (typo["status"]["phase"], typo["status"]["reason"]) == ("Failed", "InvalidSpec")
        assert "[ok] an invalid job refused, or ended InvalidSpec once" in output
        big = core.read_namespaced_pod(pending, namespace)
        assert big.status.phase == "Running" and big.spec.node_name == emptied
        on_node = core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={emptied}").items
        assert [p.metadata.name for p in on_node] == [pending]
        moved = {j["spec"]["podRef"]["name"] for j in jobs["items"]}
        assert len(moved) == len(phases)
        reservations = custom.list_cluster_custom_object(
            "scheduling.koordinator.sh", "v1alpha1", "reservations"
        )
        assert reservations["items"] == []
        # No pod but the one being made room for ever failed to schedule.
        events = core.list_event_for_all_namespaces(field_selector="reason=FailedScheduling").items
        assert {e.involved_object.name for e in events} == {pending}  # it did, before the moves
        # The intents guide's example works against it as written (but for the addresses and the pod).
        nats_url = re.search(r"NATS_URL=(\S+)", output)
        assert nats_url, output
        other = next(
            p.metadata.name
            for p in core.list_namespaced_pod("default", label_selector="app=web").items
            if p.spec.node_name != emptied
        )
        workdir = re.search(r"PODHERD_CONFIG=(\S+)/podherd\.yaml", output)
        assert workdir, output
        example = (
            intent_example()
            .replace("nats://127.0.0.1:4222", nats_url.group(1))
            .replace("web-0", other)
            .replace("/var/run/secrets/podherd/token", f"{workdir.group(1)}/requester.token")
            .replace("/var/run/secrets/podherd/nats", f"{workdir.group(1)}/pki/podherd-intent-sender")
        )
        ran = subprocess.run(
            [sys.executable, "-c", example], capture_output=True, text=True, timeout=60, check=False
        )
        assert ran.returncode == 0 and "'ok': True" in ran.stdout, ran.stdout + ran.stderr
        # The summary's follow-up hint works as printed, while --keep holds everything up.
        hint = re.search(r"audit stream: (podherd audit tail --config \S+)", output)
        assert hint, output
        tail = [sys.executable, "-m", *hint.group(1).split()]
        tailed = subprocess.run(tail, capture_output=True, text=True, timeout=60, check=False)
        assert tailed.returncode == 0 and '"transition"' in tailed.stdout, tailed.stderr
        api.close()
        assert "[FAILED]" not in output
        # The services that use Redis do so as users of their own, as deploy/ has them.
        redis_url = re.search(r"REDIS_URL=(\S+)", output)
        assert redis_url, output
        admin = redis.Redis.from_url(redis_url.group(1))
        users = {c["user"] for c in admin.client_list()}
        admin.close()
        assert {"podherd-arbitrator", "podherd-tracker"} <= users, users
    finally:
        rest, left = stop_demo(demo, signal.SIGINT)
    assert demo.returncode == 0, "".join(seen[-20:]) + rest[-2000:]
    assert "[ok] every service within its ClusterRole" in "".join(seen)
    assert left == []  # SIGINT, though ignored by its parent, stopped every server and service it started


def test_sigterm_mid_demo_stops_every_server_and_service_it_started(tmp_path: Path) -> None:
    demo = start_demo(tmp_path)
    seen: list[str] = []
    try:
        assert demo.stdout is not None
        read_until(demo.stdout, "tracker-0", seen)  # NATS, Redis, kubesim and the four services are up
        servers = set(descendants(demo.pid).values())
        assert {"nats-server", "valkey-server"} <= servers, servers
    finally:
        rest, left = stop_demo(demo, signal.SIGTERM)
    assert left == [], "".join(seen) + rest
    assert demo.returncode != 0  # stopped before it finished: not a success


@pytest.mark.kubectl
@pytest.mark.xdist_group("pod-processes")  # one worker runs every test whose pods are real processes
@pytest.mark.skipif(os.geteuid() != 0, reason="pods run as processes in their own namespaces: needs root")
@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH")
def test_demo_in_cluster_runs_podherd_from_deploy_and_defragments(tmp_path: Path) -> None:
    """`podherd demo --in-cluster`: deploy/ applied with kubectl, its pods run by kubesim's kubelet, the
    defragmentation through them; every pod ends on SIGTERM with 0 and nothing it started outlives it."""
    env = {k: v for k, v in os.environ.items() if k not in ("NATS_URL", "REDIS_URL", "KUBECONFIG")}
    summary = tmp_path / "summary.json"
    argv = [sys.executable, "-m", "podherd", "demo", "--in-cluster", "--workdir", str(tmp_path / "work")]
    demo = subprocess.Popen(
        [*argv, "--summary-json", str(summary)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    out, _ = demo.communicate(timeout=300)
    assert demo.returncode == 0, out[-3000:]
    facts = json.loads(summary.read_text())
    assert facts["jobs_succeeded"] == len(facts["jobs"]) > 0 and facts["pending_pod_phase"] == "Running"
    services = {
        f"system:serviceaccount:podherd:podherd-{s}"
        for s in ("watcher", "arbitrator", "executor", "tracker", "gate")
    }
    assert services <= set(facts["rbac_identities"]) and not facts["rbac_denials"]
    assert len(facts["services_exit_codes"]) == 12 and set(facts["services_exit_codes"].values()) == {0}
    # The mistyped job, where the gate runs: refused when it was written, naming the field.
    assert facts["mistyped"]["phase"] == "Refused" and "spec.mode" in facts["mistyped"]["message"]
    assert "[ok] an invalid job refused, or ended InvalidSpec once" in out
    assert "kubectl apply -k deploy/" in out and "[ok] every service within its ClusterRole" in out
    assert not left_running(str(tmp_path)) and not left_running("kubesim.kubelet.sandbox")


def left_running(marker: str) -> list[str]:
    """Processes whose command line names `marker` (the demo's servers, kubesim's pods)."""
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if entry.name.isdigit() and marker in (entry / "cmdline").read_bytes().decode(errors="replace"):
                found.append(entry.name)
    return found


def scenario(tmp_path: Path, name: str) -> tuple[str, dict[str, Any]]:
    """`podherd demo --scenario NAME`, which must exit 0: what it printed, and its summary."""
    env = {k: v for k, v in os.environ.items() if k not in ("NATS_URL", "REDIS_URL", "KUBECONFIG")}
    summary_path = tmp_path / "summary.json"
    argv = ["demo", "--scenario", name, "--workdir", str(tmp_path), "--summary-json", str(summary_path)]
    done = subprocess.run(
        [sys.executable, "-m", "podherd", *argv],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    summary: dict[str, Any] = json.loads(summary_path.read_text())
    return done.stdout, summary


# `make chaos` runs it (`-m full`): `make test` drains with every workload kept up, a single replica and a
# zero budget moved by surge, through the services (tests/e2e/test_drain.py, test_surge.py).
@pytest.mark.full
def test_maintenance_demo_drains_with_zero_downtime_beside_a_plain_drain(tmp_path: Path) -> None:
    said, summary = scenario(tmp_path, "maintenance")
    assert "podherd drain: zero downtime; node node-1 drained" in said
    ours, plain = summary["podherd_drain"], summary["plain_drain"]
    assert ours["drained"] and ours["left_on_node"] == [] and ours["failed"] == {}
    assert all(app["seconds_down"] == 0 and app["lowest_ready"] > 0 for app in ours["apps"].values()), ours
    # Surge kept the single replica and the zero-budget Deployment at their replicas throughout.
    assert ours["apps"]["solo"]["lowest_ready"] == 1 and ours["apps"]["guarded"]["lowest_ready"] == 2
    # The plain drain, on the same cluster: the single replica down until its replacement was Ready, and the
    # pod whose budget allows no disruption never evicted (so the node was not emptied).
    assert plain["apps"]["solo"]["lowest_ready"] == 0 and plain["apps"]["solo"]["seconds_down"] > 0
    assert list(plain["gave_up_on"]) == [p for p in plain["gave_up_on"] if "guarded" in p] != []
    assert not plain["drained"]
    assert summary["services_exit_codes"] and set(summary["services_exit_codes"].values()) == {0}


# `make chaos` runs it (`-m full`): `make test` has the same kubectl drain through the gate, held to the
# watchdog's invariants (tests/e2e/test_gate_drain.py), and no room for both.
@pytest.mark.full
@pytest.mark.kubectl
@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH")
def test_interceptor_demo_drains_with_kubectl_through_the_gate_beside_kubectl_alone(tmp_path: Path) -> None:
    said, summary = scenario(tmp_path, "interceptor")
    gated, plain = summary["gated_drain"], summary["kubectl_drain"]
    # kubectl drain itself, told 429 while each pod moved, then done: the node empty, the single replica
    # and the zero-budget Deployment never below their replicas.
    assert gated["exit"] == 0 and gated["drained"] and gated["retries"] > 0
    assert gated["apps"]["solo"]["lowest_ready"] == 1 and gated["apps"]["guarded"]["lowest_ready"] == 2
    # The same kubectl drain without the gate: the single replica down, the zero-budget pod refused until
    # kubectl gave up.
    assert plain["exit"] == 1 and not plain["drained"]
    assert plain["apps"]["solo"]["seconds_down"] > 0
    assert any("guarded" in pod for pod in plain["gave_up_on"]), plain["gave_up_on"]
    assert set(summary["exit_codes"].values()) == {0}
    assert "kubectl drain through the gate: no workload without a Ready replica; node node-1 drained" in said


# `make chaos` runs it (`-m full`): `make test` rebalances a 10-node copy of the same cluster through the
# services, beside the descheduler's way, held to the watchdog's invariants (tests/e2e/test_rebalance.py).
@pytest.mark.full
def test_rebalance_demo_keeps_every_promise_beside_the_descheduler_way(tmp_path: Path) -> None:
    said, summary = scenario(tmp_path, "rebalance")
    assert "podherd rebalance: every promise kept; 0 nodes over their targets" in said
    ours, theirs = summary["podherd"], summary["descheduler_style"]
    assert ours["replacements_pending"] == [] and ours["limits_exceeded"] == 0
    assert ours["evictions_without_room"] == [] and ours["over_targets"] == 0
    assert all(
        ours[p]["moves"] > 0 and ours[p]["failed"] == {}
        for p in ("LowNodeUtilization", "HighNodeUtilization")
    )
    # The descheduler's way on the same cluster: every db pod back on an overutilized node.
    assert (
        len(theirs["LowNodeUtilization"]["undone"]) > 0 and theirs["LowNodeUtilization"]["over_targets"] > 0
    )
    for policy in (
        "LowNodeUtilization",
        "RemovePodsViolatingTopologySpreadConstraint",
        "HighNodeUtilization",
    ):
        assert (tmp_path / f"rebalance-{policy}.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.full
@pytest.mark.parametrize("scenario", ["maintenance", "interceptor", "rebalance"])
def test_keep_holds_every_scenario_up_until_it_is_stopped(scenario: str, tmp_path: Path) -> None:
    demo = start_demo(tmp_path, "--scenario", scenario)
    seen: list[str] = []
    try:
        _, kubeconfig = until_kept_up(demo, seen)
        core: Any = client.CoreV1Api(config.new_client_from_config(config_file=kubeconfig))
        assert core.list_node().items  # the cluster is still there to look at
    finally:
        rest, left = stop_demo(demo, signal.SIGTERM)
    assert left == [], (left, rest)
