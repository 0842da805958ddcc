"""The resources kubesim serves: built-ins, plus any custom resource whose CRD is applied."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from kubesim.apiserver.schema import CrdSchema

COMMON_FIELDS = frozenset({"metadata.name", "metadata.namespace"})
VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


@dataclass(frozen=True)
class Column:
    name: str
    json_path: str
    type: str = "string"
    priority: int = 0
    description: str = ""


@dataclass(frozen=True)
class ScalePaths:
    """A CRD's `subresources.scale`: where its objects keep their replicas, the replicas observed and the
    selector (as `.spec.replicas`, split at the dots)."""

    spec: tuple[str, ...]
    status: tuple[str, ...]
    selector: tuple[str, ...] | None

    @classmethod
    def of(cls, scale: dict[str, Any]) -> ScalePaths:
        selector = scale.get("labelSelectorPath")
        return cls(
            _path(scale.get("specReplicasPath") or ".spec.replicas"),
            _path(scale.get("statusReplicasPath") or ".status.replicas"),
            _path(selector) if selector else None,
        )


def _path(text: str) -> tuple[str, ...]:
    return tuple(part for part in text.split(".") if part)


Obj = dict[str, Any]
# A protobuf message's schema: field number -> (JSON name, kind, nested schema) (kubesim.apiserver.protobuf).
Schema = dict[int, tuple[str, str, "Schema | None"]]


class Objects(Protocol):
    """What an admission hook may read of the store."""

    @property
    def registry(self) -> Registry: ...

    def find(self, rt: ResourceType, namespace: str, name: str) -> Obj | None: ...

    def objects(self, rt: ResourceType, namespace: str | None = None) -> Iterator[Obj]: ...


@dataclass(frozen=True, slots=True)
class Write:
    """A write as the built-in admission of its kind sees it: defaulted and validated in place (`obj`)."""

    objects: Objects
    operation: str
    rt: ResourceType
    old: Obj | None
    obj: Obj
    subresource: str | None


@dataclass(frozen=True)
class Printer:
    """A kind's server-side printer: its columns, and each object's cells (given how to print an age)."""

    columns: list[Column]
    cells: Callable[[Obj, Callable[[str | None], str]], list[Any]]


@dataclass
class ResourceType:
    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    singular: str = ""
    short_names: list[str] = field(default_factory=list)
    categories: list[str] = field(default_factory=list)
    subresources: frozenset[str] = frozenset()
    fields: frozenset[str] = COMMON_FIELDS
    columns: list[Column] = field(default_factory=list)
    # Whether `status` is a subresource (main-resource writes ignore status; /status writes only status).
    status_subresource: bool = False
    crd: bool = False
    verbs: tuple[str, ...] = tuple(VERBS)  # what discovery lists (the access reviews: create only)
    # A custom resource's schema, applied on every write through the API (prune, default, validate).
    schema: CrdSchema | None = None
    # A custom resource's scale subresource: where its replicas, observed replicas and selector are.
    scale_paths: ScalePaths | None = None
    # A built-in kind's own admission (defaulting and validation on write) and printer, if it has them.
    admit: Callable[[Write], None] | None = None
    printer: Printer | None = None
    protobuf: Schema | None = None  # the message a protobuf body of this kind holds

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> tuple[str, str]:
        return (self.group, self.plural)

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    def discovery(self) -> list[dict[str, Any]]:
        entries = [
            {
                "name": self.plural,
                "singularName": self.singular or self.kind.lower(),
                "namespaced": self.namespaced,
                "kind": self.kind,
                "verbs": list(self.verbs),
                **({"shortNames": self.short_names} if self.short_names else {}),
                **({"categories": self.categories} if self.categories else {}),
            }
        ]
        for sub in sorted(self.subresources):
            entry: dict[str, Any] = {
                "name": f"{self.plural}/{sub}",
                "singularName": "",
                "namespaced": self.namespaced,
            }
            if sub == "eviction":
                entry.update(kind="Eviction", group="policy", version="v1", verbs=["create"])
            elif sub == "binding":
                entry.update(kind="Binding", verbs=["create"])
            elif sub == "log":
                entry.update(kind="Pod", verbs=["get"])
            elif sub == "token":
                entry.update(
                    kind="TokenRequest", group="authentication.k8s.io", version="v1", verbs=["create"]
                )
            elif sub == "scale":
                entry.update(
                    kind="Scale", group="autoscaling", version="v1", verbs=["get", "patch", "update"]
                )
            else:
                entry.update(kind=self.kind, verbs=["get", "patch", "update"])
            entries.append(entry)
        return entries


AGE = Column("Age", ".metadata.creationTimestamp", "date")


class Registry:
    """The resources served: the built-in kinds it is made with (`kubesim.apiserver.kinds`), and each custom
    resource added when its CRD is applied."""

    def __init__(self, builtin: Iterable[ResourceType] = ()) -> None:
        self._by_path: dict[tuple[str, str, str], ResourceType] = {}
        for rt in builtin:
            self.add(rt)

    def add(self, rt: ResourceType) -> None:
        self._by_path[(rt.group, rt.version, rt.plural)] = rt

    def remove_group_resource(self, group: str, plural: str) -> None:
        for key in [k for k in self._by_path if k[0] == group and k[2] == plural]:
            del self._by_path[key]

    def get(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_path.get((group, version, plural))

    def core(self, plural: str) -> ResourceType:
        """A built-in resource of the core group (`namespaces`, `pods`, ...): always registered."""
        return self._by_path[("", "v1", plural)]

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        group, _, version = api_version.rpartition("/")
        for rt in self._by_path.values():
            if rt.group == group and rt.version == version and rt.kind == kind:
                return rt
        return None

    def all(self) -> Iterable[ResourceType]:
        return list(self._by_path.values())

    def groups(self) -> dict[str, list[str]]:
        groups: dict[str, list[str]] = {}
        for rt in self._by_path.values():
            if rt.group:
                versions = groups.setdefault(rt.group, [])
                if rt.version not in versions:
                    versions.append(rt.version)
        return groups
