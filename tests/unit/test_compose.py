"""compose.yaml against the Compose specification (no Docker engine runs here): interpolated and merged as
`docker compose` does, then parsed by the strict compose_spec parser and the models generated from the
specification's JSON schema; every service's command must be a real `podherd` command."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from compose_spec import PyCompose
from compose_spec.models import ComposeSpecification

from podherd.cli import build_parser
from podherd.harness.processes import SERVICES

ROOT = Path(__file__).resolve().parents[2]
VARIABLE = re.compile(r"\$\{(?P<name>\w+)(?::-(?P<default>[^}]*))?\}")


def resolved(text: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Interpolate `${NAME:-default}`, resolve YAML merge keys, drop `x-` extension blocks."""
    env = env or {}
    text = VARIABLE.sub(lambda m: env.get(m["name"]) or m["default"] or "", text)
    document: dict[str, Any] = yaml.safe_load(text)
    return {k: v for k, v in document.items() if not k.startswith("x-")}


def validate(document: dict[str, Any]) -> PyCompose:
    ComposeSpecification.model_validate(document)
    return PyCompose.from_json(json.dumps(document))


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return resolved((ROOT / "compose.yaml").read_text())


def test_compose_file_follows_the_specification(compose: dict[str, Any]) -> None:
    parsed = validate(compose)
    assert set(parsed.service_names()) == {"nats", "redis", "kubesim", *SERVICES}


def test_the_validator_rejects_what_compose_would(compose: dict[str, Any]) -> None:
    broken = json.loads(json.dumps(compose))
    broken["services"]["watcher"]["restart"] = "sometimes"
    with pytest.raises(ValueError, match="sometimes"):
        validate(broken)
    typo = json.loads(json.dumps(compose))
    typo["services"]["tracker"]["comand"] = ["run", "tracker"]
    with pytest.raises(ValueError, match="comand"):
        validate(typo)


def test_every_dependency_exists_and_kubesim_is_optional(compose: dict[str, Any]) -> None:
    services = compose["services"]
    for name, service in services.items():
        for dependency, condition in (service.get("depends_on") or {}).items():
            assert dependency in services, f"{name} depends on a missing {dependency}"
            if "profiles" in services[dependency]:
                assert condition.get("required") is False, f"{name} must start without {dependency}"
    assert services["kubesim"]["profiles"] == ["kubesim"]
    assert all("profiles" not in services[s] for s in ("nats", "redis", *SERVICES))


def test_every_service_command_is_a_podherd_command(compose: dict[str, Any]) -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["podherd"]' in dockerfile
    parser = build_parser()
    for name in (*SERVICES, "kubesim"):
        service = compose["services"][name]
        assert service["image"] == "podherd:0.1.0" and service["build"]["dockerfile"] == "Dockerfile"
        args = parser.parse_args(service["command"])  # exits (SystemExit) on anything the CLI lacks
        assert callable(args.func)
        if name in SERVICES:
            assert service["command"] == ["run", name]
            # Its own ServiceAccount's kubeconfig on kubesim, else the mounted directory's.
            first, *rest = service["environment"]["KUBECONFIG"].split(":")
            assert first == f"/var/run/podherd/kubeconfig-{name}" and rest
    assert "--podherd-accounts=/var/run/podherd" in compose["services"]["kubesim"]["command"]


def test_a_real_cluster_is_one_kubeconfig_mount() -> None:
    compose = resolved((ROOT / "compose.yaml").read_text(), {"PODHERD_KUBECONFIG_DIR": "/home/me/.kube"})
    for name in SERVICES:
        assert "/home/me/.kube:/var/run/podherd:ro" in compose["services"][name]["volumes"]
    validate(compose)


def test_the_dockerfile_copies_what_exists() -> None:
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        if line.startswith("COPY ") and "--from" not in line:
            for source in line.split()[1:-1]:
                assert (ROOT / source).exists(), source
