"""The CLI as people expect from kubectl: a value that can never work is a usage error (exit 2, one line in
the user's terms naming the argument, with where the usage is: no type names, no regular expressions, no
traceback); a failure at run time is exit 1 with one line; a closed pipe ends quietly; Ctrl-C says what
goes on."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from podherd import __version__, cli
from podherd.arguments import what_goes_on
from podherd.harness.servers import free_port

pytestmark = pytest.mark.integration

USAGE = [
    ["submit", "Default/Web"],
    ["submit", "default"],
    ["submit", "default/web/0"],
    ["submit", "default/Web_0"],
    ["submit", "default/web-0", "--ttl", "5minutes"],
    ["submit", "default/web-0", "--ttl", "5"],
    ["submit", "default/web-0", "--ttl", "-5m"],
    ["submit", "default/web-0", "--timeout", "-1"],
    ["submit", "default/web-0", "--timeout", "ten"],
    ["submit", "default/web-0", "--wait-timeout", "0"],
    ["submit", "default/web-0", "--mode", "Teleport"],
    ["submit", "default/web-0", "--target-node", "Bad_Node"],
    ["submit", "default/web-0", "--via", "pigeon"],
    ["submit"],
    ["drain", "Bad_Node"],
    ["drain", "node-1", "--timeout", "5minutes"],
    ["drain", "node-1", "--request-timeout", "0"],
    ["drain"],
    ["jobs", "-o", "xml"],
    ["plan", "--timeout", "-3"],
    ["audit"],
    ["run", "nothing"],
    ["sim", "--port", "a-port"],
    ["config", "--nope"],
    ["teleport"],
]


@pytest.mark.parametrize("argv", USAGE, ids=[" ".join(a) or "-" for a in USAGE])
def test_a_value_that_can_never_work_is_a_usage_error_in_the_users_terms(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as ended:
        cli.main(argv)
    assert ended.value.code == 2
    captured = capsys.readouterr()
    (line,) = captured.err.splitlines()
    assert line.startswith("podherd") and line.endswith("--help)"), captured.err
    assert captured.out == ""
    for internal in ("Traceback", "ValueError", "<class", "^", "\\d", "[a-z0-9]"):
        assert internal not in captured.err, captured.err


def test_the_names_and_durations_are_explained_with_an_example(capsys: pytest.CaptureFixture[str]) -> None:
    for argv, said in (
        (["submit", "Default/Web"], "'Default' is not a namespace: lowercase letters, digits and '-'"),
        (
            ["submit", "default/web", "--ttl", "5minutes"],
            "'5minutes' is not a duration; use one such as 30s, 5m",
        ),
        (["drain", "Bad_Node"], "'Bad_Node' is not a node name: lowercase letters, digits, '-' and '.'"),
        (["submit", "default/web", "--timeout", "-1"], "must be more than 0 seconds, got -1"),
    ):
        with pytest.raises(SystemExit):
            cli.main(argv)
        assert said in capsys.readouterr().err


def test_version_as_a_flag_and_a_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ended:
        cli.main(["--version"])
    assert ended.value.code == 0 and capsys.readouterr().out.strip() == f"podherd {__version__}"
    assert cli.main(["version"]) == 0 and capsys.readouterr().out.strip() == f"podherd {__version__}"


def test_a_failure_at_run_time_is_one_line_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "podherd.yaml"
    unreachable = {"url": f"nats://127.0.0.1:{free_port()}"}
    config.write_text(yaml.safe_dump({"nats": unreachable, "intents": {"authorization": "none"}}))
    assert cli.main(["submit", "default/web-0", "--config", str(config)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("podherd: cannot reach NATS at nats://127.0.0.1:"), err
    assert err.rstrip().split(": ")[-1], err  # the reason is said
    missing = tmp_path / "podherd-missing-kubeconfig.yaml"
    missing.write_text(yaml.safe_dump({"kubernetes": {"kubeconfig": str(tmp_path / "nowhere")}}))
    assert cli.main(["submit", "default/web-0", "--via", "kubernetes", "--config", str(missing)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("podherd: no usable kubeconfig"), err
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"migrationController": {"defaultJobMode": "Teleport"}}))
    assert cli.main(["config", "--config", str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "defaultJobMode" in err, err


def test_a_closed_pipe_ends_quietly() -> None:
    with subprocess.Popen(
        [sys.executable, "-m", "podherd", "config", "--reference"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as reader:
        assert reader.stdout is not None and reader.stderr is not None
        reader.stdout.close()  # as `| head -0`: gone before the command writes its first line
        err = reader.stderr.read().decode()
        assert reader.wait(30) == 0 and err == "", err


def test_ctrl_c_says_what_goes_on_without_the_cli() -> None:
    drain = what_goes_on("drain", {"node": "node-1"})
    assert "node node-1 stays cordoned" in drain and "kubectl uncordon node-1" in drain
    assert "podherd drain node-1 --status" in drain
    assert "the job goes on" in what_goes_on("submit", {"wait": True})
    assert what_goes_on("drain", {"node": "node-1", "dry_run": True}) == "nothing was left running"


def test_a_gate_without_its_certificate_ends_once_naming_the_setting(tmp_path: Path) -> None:
    from kubesim.sim import write_kubeconfig
    from tests.e2e.pipeline import podherd

    kubeconfig = write_kubeconfig("https://127.0.0.1:9", tmp_path / "kubeconfig", "unused")
    config = tmp_path / "podherd.yaml"
    gate = {"cert": str(tmp_path / "missing.crt"), "key": str(tmp_path / "missing.key"), "port": 0}
    config.write_text(
        yaml.safe_dump({"kubernetes": {"kubeconfig": str(kubeconfig)}, "gate": gate, "http": {"port": 0}})
    )
    done = podherd(config, "run", "gate", timeout=60)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("podherd: configuration error at `gate.cert`: the serving certificate "), last
    assert "missing.crt" in last
