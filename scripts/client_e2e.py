"""The official Kubernetes Python client's own end-to-end tests (`kubernetes/e2e_test` of
kubernetes-client/python) against kubesim: every test must pass but those named in EXPECTED_FAILURES.

The tests are not part of the client's wheel or sdist: they are read from a git repository of the client
(a clone, or a URL git can fetch), at REVISION, into a scratch directory, and run there by pytest with a
HOME whose kubeconfig is kubesim's (the tests load `~/.kube/config`). Nothing of them is kept.

    python scripts/client_e2e.py --source https://github.com/kubernetes-client/python

Exit 0 when the failures are exactly the expected ones, 1 otherwise (each difference named), 2 when the
tests could not be had.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

from kubesim.sim import start_subprocess
from podherd.realcluster import engine as real_engine

# The client's master as of August 2026 (after v36.0.3; the release installed here is 37.0.2).
REVISION = "024658493d124f046fc0a9827a2a3165cf2aee28"

# What the real engine does not do: kwok runs no containers.
REAL_EXPECTED_FAILURES = {
    "test_client.py::TestClient::test_pod_apis": "exec into a container (kwok runs no container)",
    "test_client.py::TestClient::test_exit_code": "exec into a container",
    "test_client.py::TestClient::test_pod_exec_close_channel": "exec into a container",
    "test_client.py::TestClient::test_portforward_raw": "port-forward (no kubelet streams)",
    "test_client.py::TestClient::test_portforward_http": "port-forward",
}
# What kubesim does not do, each for its reason.
EXPECTED_FAILURES = {
    "test_client.py::TestClient::test_pod_apis": "exec into a container (kubesim runs no exec stream)",
    "test_client.py::TestClient::test_exit_code": "exec into a container",
    "test_client.py::TestClient::test_pod_exec_close_channel": "exec into a container",
    "test_client.py::TestClient::test_portforward_raw": "port-forward (no SPDY/WebSocket streams)",
    "test_client.py::TestClient::test_portforward_http": "port-forward",
    "test_utils.py::TestUtils::test_create_apiservice_from_yaml_with_conflict": "no aggregated APIs",
    "test_utils.py::TestUtils::test_create_apps_deployment_from_yaml_with_apply_is_idempotent": (
        "server-side apply is refused with 415"
    ),
}

CONFTEST = """
import kubernetes, pathlib
# The tests import themselves as `kubernetes.e2e_test`: the installed client's package is extended by them.
kubernetes.__path__.append(str(pathlib.Path(__file__).parent / "kubernetes"))
"""


def fetch_tests(source: str, revision: str, into: Path) -> Path:
    """`kubernetes/e2e_test` at `revision` of the git repository `source`, unpacked under `into`."""
    repo = Path(source)
    if not (repo / "HEAD").exists() and not (repo / ".git").exists():
        clone = into / "client.git"
        subprocess.run(
            ["git", "clone", "--quiet", "--bare", "--filter=blob:none", source, str(clone)], check=True
        )
        repo = clone
    archive = subprocess.run(
        ["git", "-C", str(repo), "archive", revision, "kubernetes/e2e_test"], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    (into / "conftest.py").write_text(CONFTEST)
    return into / "kubernetes" / "e2e_test"


def outcomes(junit: Path) -> dict[str, str]:
    """Each test's outcome (passed, failed, skipped) by `file::Class::test`."""
    results = {}
    for case in ET.parse(junit).iter("testcase"):
        module, _, cls = case.get("classname", "").rpartition(".")
        name = f"{module.rpartition('.')[2]}.py::{cls}::{case.get('name')}"
        kinds = {child.tag for child in case}
        results[name] = (
            "failed" if kinds & {"failure", "error"} else "skipped" if "skipped" in kinds else "passed"
        )
    return results


def run(tests: Path, work: Path, engine: str) -> dict[str, str]:
    """Start the engine, run the tests against it, and return their outcomes."""
    home = work / "home"
    (home / ".kube").mkdir(parents=True)
    # Two nodes, so that the pods the tests make are scheduled and run. Watches without a timeout end within
    # 10 s: an informer test stops its informer while its watch may still be waiting for a first event (the
    # client's Watch.stop takes effect at the next one), which a server's default would hold for 30-60 min.
    if engine == "real":
        handle = real_engine.start("generate:2:0", apiserver_args=("--min-request-timeout=5",))
        shutil.copyfile(handle.kubeconfig, home / ".kube" / "config")
    else:
        extra = ["--min-request-timeout", "5"]
        handle = start_subprocess("generate:2:0", kubeconfig=home / ".kube" / "config", extra_args=extra)
    try:
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"} | {"HOME": str(home)}
        junit = work / "junit.xml"
        argv = [
            sys.executable,
            "-m",
            "pytest",
            "-v",
            "-p",
            "no:cacheprovider",
            "-o",
            "addopts=",
            "--timeout=300",
            str(tests),
        ]
        subprocess.run([*argv, f"--junitxml={junit}", f"--rootdir={work}"], cwd=work, env=env, check=False)
        return outcomes(junit)
    finally:
        handle.stop()


def compare(results: dict[str, str], expected: dict[str, str]) -> list[str]:
    """What differs from the expectation: a failure not expected, or an expected one that passed."""
    wrong = [
        f"failed: {name}" for name, how in sorted(results.items()) if how == "failed" and name not in expected
    ]
    wrong += [
        f"expected to fail ({why}) but {results.get(name, 'not run')}: {name}"
        for name, why in expected.items()
        if results.get(name) != "failed"
    ]
    return wrong


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--source", default=os.environ.get("CLIENT_E2E_SOURCE", ""), help="git repository")
    parser.add_argument("--revision", default=REVISION)
    parser.add_argument("--keep", action="store_true", help="leave the scratch directory")
    parser.add_argument("--engine", choices=("kubesim", "real"), default="kubesim")
    args = parser.parse_args()
    if not args.source:
        print("client_e2e: name the client's repository with --source or CLIENT_E2E_SOURCE", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="client-e2e-"))
    try:
        try:
            tests = fetch_tests(args.source, args.revision, work)
        except subprocess.CalledProcessError as error:
            print(f"client_e2e: the tests could not be read from {args.source}: {error}", file=sys.stderr)
            return 2
        results = run(tests, work, args.engine)
        counts = {how: list(results.values()).count(how) for how in ("passed", "failed", "skipped")}
        print(f"client_e2e: {len(results)} tests at {args.revision[:12]} on {args.engine}: {counts}")
        wrong = compare(results, REAL_EXPECTED_FAILURES if args.engine == "real" else EXPECTED_FAILURES)
        for line in wrong:
            print(f"client_e2e: {line}")
        return 1 if wrong else 0
    finally:
        if args.keep:
            print(f"client_e2e: scratch directory {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
