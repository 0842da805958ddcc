"""The planner knows the jobs it asked for by the requester the tracker verified, never by a name an intent
claimed (pure, but for its token file)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from services.planner.cycle import Cycle
from shared.api.names import ANNOTATION_CLAIMED_REQUESTER, ANNOTATION_REQUESTER
from shared.config.loader import config_from_dict

ME = "system:serviceaccount:podherd:podherd-planner"


def token(sub: str) -> str:
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return f"{part({'alg': 'RS256'})}.{part({'sub': sub, 'exp': 2_000_000_000})}.signature"


def cycle(tmp_path: Path, authorization: str) -> Cycle:
    (tmp_path / "token").write_text(token(ME))
    intents = {"authorization": authorization, "tokenFile": str(tmp_path / "token")}
    config = config_from_dict({"intents": intents, "planner": {"requester": "podherd-planner"}})
    return Cycle(config, nc=None, kube=None)  # type: ignore[arg-type]


def test_with_kubernetes_authorization_its_jobs_are_those_verified_as_its_service_account(
    tmp_path: Path,
) -> None:
    ours = cycle(tmp_path, "kubernetes").ours()
    assert ours({ANNOTATION_REQUESTER: ME, ANNOTATION_CLAIMED_REQUESTER: "podherd-planner"})
    # Someone else's intent claiming its name is someone else's job.
    assert not ours(
        {
            ANNOTATION_REQUESTER: "system:serviceaccount:tools:x",
            ANNOTATION_CLAIMED_REQUESTER: "podherd-planner",
        }
    )
    assert not ours({ANNOTATION_CLAIMED_REQUESTER: "podherd-planner"})


def test_with_subject_authorization_its_claim_counts_only_on_the_request_subjects(tmp_path: Path) -> None:
    ours = cycle(tmp_path, "subject").ours()
    assert ours(
        {
            ANNOTATION_REQUESTER: "nats:podherd.intent.request.shop",
            ANNOTATION_CLAIMED_REQUESTER: "podherd-planner",
        }
    )
    assert not ours(
        {ANNOTATION_REQUESTER: "nats:podherd.intents.shop", ANNOTATION_CLAIMED_REQUESTER: "podherd-planner"}
    )
    assert not ours(
        {ANNOTATION_REQUESTER: "nats:podherd.intent.request.shop", ANNOTATION_CLAIMED_REQUESTER: "x"}
    )
