"""The admission ledger's Redis keys: each family spelled once, here, for the Python and the Lua alike (every
ledger script starts with `lua_prelude()`, a table `K` of the same suffixes: `p .. K.slots .. key`).

Every key is under one hash tag, `{<keyPrefix>}:ledger`, so each script touches one Redis Cluster slot.

| family | type | what it holds |
|---|---|---|
| `slots:<slot key>` | set | the jobs holding that limit's slot (`node:n1`, `workload:Kind/ns/name`, ...) |
| `evicting:<slot key>` | set | pods evicted in the background, counted against that limit |
| `ready:<workload slot key>` | set | the workload's Ready pods, kept from the pod events |
| `gone:<workload slot key>` | set | its jobs in flight whose old pod is no longer among them |
| `pod:<namespace/name>` | string | the pod's last applied event (`<resourceVersion> <uid> <slot key>`) |
| `job:<uid>` | hash | what an admitted job holds (`pod`, `slots`, `admitted`, `surge`) |
| `bucket:<bucket key>` | hash | a token bucket's `tokens` and `ts` |
| `wait:<gate>` | sorted set | the jobs parked on a gate (`slot:<key>`, `bucket:<key>`), best first |
| `claims` | hash | pod uid -> the job moving it |
| `done` | set | jobs admitted once (never admitted twice) |
| `expiry` | sorted set | admitted jobs by when their slots expire |
| `marker` | string | the ledger is complete; its value is the generation |
| `rebuilding` | string | the lock of the replica rebuilding the ledger |
| `queue` | sorted set | the ready queue (`<sort key>|<job uid>`, read in lexicographic order) |
| `queued` | hash | every pending job -> its queue member |
| `parked` | hash | parked jobs -> the gate they wait on |
| `gates` | set | gates with waiters |
| `timers` | sorted set | `job:<uid>` or `gate:<gate>` -> when it is due |
| `wokefrom` | hash | a woken job -> the gate that woke it |
| `limit` | hash | slot key -> its last known limit |
| `unavailable` | hash | workload slot key -> `<maxUnavailable> <replicas>`, last known |
| `bucketcfg` | hash | bucket key -> `<rate> <burst>` |
| `announce` | hash | outcomes taken off the queue whose decisions may not be published yet |
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal, TypeAlias, get_args

Family: TypeAlias = Literal[
    "claims",
    "done",
    "expiry",
    "marker",
    "rebuilding",
    "queue",
    "queued",
    "parked",
    "gates",
    "timers",
    "wokefrom",
    "limit",
    "unavailable",
    "bucketcfg",
    "announce",
]
MemberFamily: TypeAlias = Literal["slots", "evicting", "ready", "gone", "pod", "job", "bucket", "wait"]

FAMILIES: Final[tuple[str, ...]] = get_args(Family)
MEMBER_FAMILIES: Final[tuple[str, ...]] = get_args(MemberFamily)


def ledger_prefix(key_prefix: str) -> str:
    """Every ledger key starts with this; the hash tag keeps them in one Redis Cluster slot."""
    return "{" + key_prefix + "}:ledger"


@dataclass(frozen=True)
class LedgerKeys:
    prefix: str  # ledger_prefix(keyPrefix)

    @classmethod
    def of(cls, key_prefix: str) -> LedgerKeys:
        return cls(ledger_prefix(key_prefix))

    def key(self, family: Family) -> str:
        return f"{self.prefix}:{family}"

    def member(self, family: MemberFamily, name: str) -> str:
        return f"{self.prefix}:{family}:{name}"


def lua_prelude() -> str:
    """The table `K` the ledger scripts spell their keys with: `p .. K.claims`, `p .. K.slots .. key`."""
    entries = [f"{f} = ':{f}'" for f in FAMILIES] + [f"{f} = ':{f}:'" for f in MEMBER_FAMILIES]
    return "-- The ledger's key families (shared/ledger/keys.py).\nlocal K = {" + ", ".join(entries) + "}\n"
