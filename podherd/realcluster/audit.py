"""Who did what on the real engine, read from kube-apiserver's audit log: the identities that made requests
and every request RBAC refused, in the shape kubesim's authorizer records them (`denials`, `used`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class AuditTrail:
    log: Path
    _read: int = 0
    _used: set[tuple[str, str, str, str]] = field(default_factory=set)
    _denials: list[str] = field(default_factory=list)

    @property
    def used(self) -> set[tuple[str, str, str, str]]:
        """(user, verb, group, resource[/subresource]) of every request allowed so far."""
        self._catch_up()
        return self._used

    @property
    def denials(self) -> list[str]:
        self._catch_up()
        return self._denials

    def _catch_up(self) -> None:
        if not self.log.exists():
            return
        with self.log.open("rb") as lines:
            lines.seek(self._read)
            for line in lines:
                if not line.endswith(b"\n"):
                    break  # the API server is still writing it
                self._read += len(line)
                self._take(json.loads(line))

    def _take(self, event: dict[str, Any]) -> None:
        user = (event.get("user") or {}).get("username", "")
        ref = event.get("objectRef") or {}
        resource = ref.get("resource", "") + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        verb = event.get("verb", "")
        decision = (event.get("annotations") or {}).get("authorization.k8s.io/decision")
        if decision == "forbid":
            where = f" in {ref['namespace']}" if ref.get("namespace") else ""
            self._denials.append(f"{user} may not {verb} {resource or event.get('requestURI', '')}{where}")
        elif decision == "allow":
            self._used.add((user, verb, ref.get("apiGroup", ""), resource))
