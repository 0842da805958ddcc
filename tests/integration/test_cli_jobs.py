"""`podherd jobs` as kubectl shows objects: `-o wide` adds each job's mode and the why of its state, `-o
yaml|json` the whole objects, `-l` selects by label, `-w` prints each change as it comes; `--kubeconfig`
and `--context` choose the cluster as kubectl's do."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from kubesim.sim import SimHandle
from podherd import cli
from tests.e2e.pipeline import GROUP, PLURAL, VERSION, create_job
from tests.e2e.test_lifecycle import cluster, start, web_pods

pytestmark = pytest.mark.integration


def two_contexts(handle: SimHandle, path: Path) -> Path:
    """The kubesim kubeconfig with a second, unreachable, context made current."""
    document = yaml.safe_load(handle.kubeconfig.read_text())
    document["clusters"].append({"name": "away", "cluster": {"server": "https://127.0.0.1:1"}})
    document["contexts"].append(
        {"name": "away", "context": {"cluster": "away", "user": document["users"][0]["name"]}}
    )
    document["current-context"] = "away"
    path.write_text(yaml.safe_dump(document))
    return path


def test_jobs_wide_yaml_selected_and_by_context(
    kubesim_factory: Callable[..., SimHandle], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kube = start(kubesim_factory, cluster(web=2))
    first, second = sorted(web_pods(kube))
    create_job(kube, "team-a-job", first, mode="EvictDirectly", annotations={"podherd.io/abort": "held"})
    kube.custom.patch_cluster_custom_object(
        GROUP, VERSION, PLURAL, "team-a-job", {"metadata": {"labels": {"team": "a"}}}
    )
    create_job(kube, "team-b-job", second)
    kubeconfig = two_contexts(kube.handle, tmp_path / "kubeconfig")
    good = yaml.safe_load(kube.handle.kubeconfig.read_text())["current-context"]
    chosen = ["--kubeconfig", str(kubeconfig), "--context", good]

    assert cli.main(["jobs", *chosen, "-o", "wide", "-l", "team=a"]) == 0
    header, *rows = capsys.readouterr().out.splitlines()
    assert header.split() == ["NAME", "PHASE", "REASON", "POD", "NODE", "AGE", "MODE", "MESSAGE"]
    assert len(rows) == 1 and rows[0].startswith("team-a-job") and "EvictDirectly" in rows[0]

    assert cli.main(["jobs", *chosen, "-o", "yaml"]) == 0
    shown = yaml.safe_load(capsys.readouterr().out)
    assert (shown["apiVersion"], shown["kind"]) == ("v1", "List")
    assert sorted(j["metadata"]["name"] for j in shown["items"]) == ["team-a-job", "team-b-job"]
    assert cli.main(["jobs", *chosen, "-o", "json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["kind"] == "List" and len(listed["items"]) == 2
    assert all("managedFields" not in j["metadata"] for j in listed["items"])

    assert cli.main(["jobs", *chosen, "team-b-job", "-o", "json"]) == 0  # one job, as itself
    one = json.loads(capsys.readouterr().out)
    assert one["kind"] == "PodMigrationJob" and one["metadata"]["name"] == "team-b-job"
    assert cli.main(["jobs", *chosen, "team-b-job", "--no-headers"]) == 0
    (row,) = capsys.readouterr().out.splitlines()
    assert row.split()[0] == "team-b-job"
    assert cli.main(["jobs", *chosen, "-o", "name"]) == 0
    assert capsys.readouterr().out.split() == [
        "podmigrationjob.scheduling.koordinator.sh/team-a-job",
        "podmigrationjob.scheduling.koordinator.sh/team-b-job",
    ]
    assert cli.main(["jobs", *chosen, "-l", "team=nobody"]) == 0
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", "No resources found\n")
    assert cli.main(["jobs", *chosen, "no-such-job"]) == 1
    assert capsys.readouterr().err == (
        'podherd: Error from server (NotFound): podmigrationjobs.scheduling.koordinator.sh "no-such-job" '
        "not found\n"
    )

    assert cli.main(["jobs", "--kubeconfig", str(kubeconfig)]) == 1  # its current context is away
    assert capsys.readouterr().err.startswith(
        "podherd: cannot reach the Kubernetes API at https://127.0.0.1:1"
    )


def test_jobs_watch_prints_each_change(kubesim_factory: Callable[..., SimHandle]) -> None:
    kube = start(kubesim_factory, cluster(web=1))
    (pod,) = web_pods(kube)
    with subprocess.Popen(
        [sys.executable, "-m", "podherd", "jobs", "-w", "--kubeconfig", str(kube.handle.kubeconfig)],
        stdout=subprocess.PIPE,
        text=True,
    ) as watching:
        assert watching.stdout is not None
        try:
            # Listed or watched, however the create meets the list: the header comes with the first row.
            create_job(kube, "watched", pod)
            assert watching.stdout.readline().split()[0] == "NAME"
            assert watching.stdout.readline().split()[0] == "watched"
        finally:
            watching.terminate()
