"""The operator's side of Podherd, for the CLI: submit an intent and follow its job, list jobs, read the audit
stream, and plan a defragmentation. Every failure to reach a server becomes one `CliError` line."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import re
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import msgspec
import nats
import nats.errors
import urllib3.exceptions
from kubernetes.config import ConfigException

from podherd.errors import CliError
from shared.api import codec, paths
from shared.api.messages import AuditRecord, IntentReply, MigrationIntent
from shared.api.pmj import REASON_WAIT_FOR_WINDOW, TERMINAL_PHASES
from shared.config.model import PodherdConfig, nats_servers
from shared.core.backoff import describe
from shared.core.redact import without_credentials
from shared.intake.intent_requests import bearer, intent_subject
from shared.kube.client import KubeClient, KubeError
from shared.nats import bus
from shared.nats.access import Access

# ---------------------------------------------------------------------------------------------------------
# Connections


@contextlib.contextmanager
def kube_client(config: PodherdConfig) -> Iterator[KubeClient]:
    try:
        kube = KubeClient.from_config(config.kubernetes)
    except (ConfigException, OSError) as exc:
        raise CliError(f"no usable kubeconfig: {exc}") from exc
    try:
        yield kube
    finally:
        kube.close()


def kube_get(kube: KubeClient, path: str, *, missing_ok: bool = False) -> Any:
    """The object or list at `path`; with `missing_ok`, None where there is none (404)."""
    try:
        return msgspec.json.decode(kube.request("GET", path, timeout=10))
    except KubeError as exc:
        if missing_ok and exc.status == 404:
            return None
        raise CliError(f"the Kubernetes API answered GET {path} with {exc}") from exc
    except urllib3.exceptions.HTTPError as exc:
        host = kube.api.configuration.host
        raise CliError(f"cannot reach the Kubernetes API at {host}: {_root(exc)}") from exc


def _root(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None)
    return str(reason or exc)


@contextlib.asynccontextmanager
async def nats_client(config: PodherdConfig) -> AsyncIterator[Any]:
    failures: list[Exception] = []

    async def noted(exc: Exception) -> None:  # nats-py would log each failed attempt; the CLI says why once
        failures.append(exc)

    try:
        nc = await nats.connect(
            nats_servers(config.nats.url),
            name="podherd-cli",
            connect_timeout=3,
            allow_reconnect=False,
            max_reconnect_attempts=1,  # 0 would mean "forever" to nats-py's first connect
            reconnect_time_wait=0.2,
            error_cb=noted,
            **Access(config.nats).options,
        )
    except (OSError, TimeoutError, nats.errors.Error) as exc:
        where = without_credentials(config.nats.url)
        raise CliError(f"cannot reach NATS at {where}: {describe(failures[0] if failures else exc)}") from exc
    try:
        yield nc
    finally:
        with contextlib.suppress(Exception):
            await nc.close()


# ---------------------------------------------------------------------------------------------------------
# submit


def intent_key(namespace: str, name: str, target_node: str | None, *, mode: str | None) -> str:
    """One key per distinct request made from the CLI within a minute: a re-run does not double the job."""
    minute = int(time.time() // 60)
    return hashlib.sha256(f"{namespace}/{name}|{target_node}|{mode}|{minute}".encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Sender:
    """How this client sends intents, as the trackers take them (`intents.authorization`): with `subject`,
    on the subject of the pod's namespace (drains on theirs); with `kubernetes`, carrying the token in
    `intents.tokenFile`, read at each send (a projected token is rotated in place)."""

    subjects: bus.Subjects
    authorization: str = "none"
    token_file: str | None = None

    @classmethod
    def of(cls, config: PodherdConfig, token_file: str | None = None) -> Sender:
        intents = config.intents
        sender = cls(
            bus.Subjects(config.nats.subject_prefix), intents.authorization, token_file or intents.token_file
        )
        if sender.authorization == "kubernetes" and sender.token_file is None:
            raise CliError(
                "intents are authorized by the sender's ServiceAccount token: give one made for the audience "
                f"{intents.audience!r} with --token-file or intents.tokenFile "
                f"(e.g. kubectl create token NAME --audience {intents.audience} > token)"
            )
        return sender

    def subject(self, *, namespace: str | None = None, drain: bool = False) -> str:
        return intent_subject(self.subjects, self.authorization, namespace=namespace, drain=drain)

    def headers(self) -> dict[str, str] | None:
        try:
            return bearer(self.token_file)
        except OSError as exc:
            raise CliError(f"cannot read the token file {self.token_file}: {exc.strerror}") from exc


def signed(config: PodherdConfig) -> dict[str, str]:
    """The NATS headers of an intent sent with this configuration's token (none without one)."""
    return (
        Sender(bus.Subjects(config.nats.subject_prefix), token_file=config.intents.token_file).headers() or {}
    )


async def ask_tracker(
    nc: Any, sender: Sender, data: bytes, *, within: float, namespace: str | None = None, drain: bool = False
) -> bytes:
    """A request on the intent subject (a migration or a drain) and the tracker's answer."""
    subject = sender.subject(namespace=namespace, drain=drain)
    try:
        msg = await nc.request(subject, data, timeout=within, headers=sender.headers())
    except nats.errors.NoRespondersError as exc:
        raise CliError(f"no tracker answers on {subject}: is Podherd running?") from exc
    except (TimeoutError, nats.errors.TimeoutError) as exc:
        raise CliError(f"no answer on {subject} within {within:.0f} s") from exc
    answer: bytes = msg.data
    return answer


async def request_intent(nc: Any, sender: Sender, intent: MigrationIntent, *, within: float) -> IntentReply:
    data = codec.encode(intent)
    answer = await ask_tracker(nc, sender, data, within=within, namespace=intent.pod.namespace)
    reply = codec.decode(answer, IntentReply)
    if not reply.ok or reply.job is None:
        error = reply.error
        where = f" ({error.field})" if error and error.field else ""
        raise CliError(
            f"intent refused: {error.code if error else '?'}{where}: {error.message if error else ''}"
        )
    return reply


class Waits:
    """A job's deferrals as a person following it wants them: a wait is shown when it starts, not again
    while the same rule and the same object (a slot, a token bucket) hold the job."""

    def __init__(self) -> None:
        self.last: tuple[str, str] | None = None

    def news(self, record: AuditRecord) -> bool:
        """Whether `record` is worth showing: anything but a repeat of the wait shown last."""
        if record.action != "decision" or record.details.get("decision") != "deferred":
            return True
        wait = (record.rule or "", record.details.get("waitingOn", ""))
        repeated = wait == self.last
        self.last = wait
        return not repeated


async def follow_job(
    nc: Any, subjects: bus.Subjects, job: str, *, within: float, show: Callable[[AuditRecord], None]
) -> AuditRecord:
    """Print the job's audit records as they arrive (from its first) until one shows a terminal phase."""
    sub = await nc.jetstream().subscribe(subjects.audit(job), ordered_consumer=True)
    deadline = time.monotonic() + within
    waits = Waits()
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise CliError(f"job {job} did not end within {within:.0f} s (see `podherd jobs`)")
            try:
                msg = await sub.next_msg(timeout=left)
            except (TimeoutError, nats.errors.TimeoutError):
                continue
            record = codec.decode(msg.data, AuditRecord)
            if waits.news(record):
                show(record)
            if record.phase in TERMINAL_PHASES and record.action == "transition":
                return record
    finally:
        with contextlib.suppress(Exception):
            await sub.unsubscribe()


# ---------------------------------------------------------------------------------------------------------
# jobs


def job_rows(items: list[dict[str, Any]], now: datetime) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for item in sorted(
        items, key=lambda i: (i["metadata"].get("creationTimestamp") or "", i["metadata"]["name"])
    ):
        status = item.get("status") or {}
        ref = (item.get("spec") or {}).get("podRef") or {}
        rows.append(
            (
                item["metadata"]["name"],
                status.get("phase") or "Pending",
                _reason(status, now),
                f"{ref.get('namespace', '')}/{ref.get('name', '')}",
                status.get("nodeName") or "",
                age(item["metadata"].get("creationTimestamp"), now),
            )
        )
    return rows


# How a job waiting for a disruption window says when it opens (services.tracker.jobs.deadlines.window_mark).
_OPENS_AT = re.compile(r"it opens at (\S+Z)")


def _reason(status: dict[str, Any], now: datetime) -> str:
    """The status reason; for a job waiting for a disruption window, with when the window opens."""
    reason = str(status.get("reason") or "")
    found = _OPENS_AT.search(str(status.get("message") or "")) if reason == REASON_WAIT_FOR_WINDOW else None
    if found is None:
        return reason
    opens = datetime.fromisoformat(found.group(1).replace("Z", "+00:00"))
    seconds = max(0, int((opens - now).total_seconds()))
    return f"{reason} (opens {found.group(1)}, in {_span(seconds)})"


def _span(seconds: int) -> str:
    for size, unit in ((86400, "d"), (3600, "h"), (60, "m")):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{max(seconds, 0)}s"


def age(stamp: str | None, now: datetime) -> str:
    if not stamp:
        return "?"
    return _span(int((now - datetime.fromisoformat(stamp.replace("Z", "+00:00"))).total_seconds()))


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(c)) for c in column) for column in zip(header, *rows, strict=True)]
    return "\n".join(
        "   ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    )


def list_jobs(config: PodherdConfig) -> list[dict[str, Any]]:
    with kube_client(config) as kube:
        items: list[dict[str, Any]] = kube_get(kube, paths.JOBS).get("items") or []
        return items


# ---------------------------------------------------------------------------------------------------------
# audit


# How long a read of the audit stream waits for its next record before it counts as stalled.
STALL_S = 5.0


class AuditStalled(CliError):
    """The audit stream stopped delivering in the middle of a read: what was read is not all of it."""


async def audit_records(
    nc: Any, subjects: bus.Subjects, job: str | None, *, follow: bool
) -> AsyncIterator[bytes]:
    """The audit stream from its start (one job's, or all), then new records while `follow`."""
    js = nc.jetstream()
    subject = subjects.audit(job) if job else subjects.all_audit
    try:
        info = await js.stream_info(subjects.audit_stream)
    except nats.js.errors.NotFoundError as exc:
        raise CliError(
            f"no audit stream {subjects.audit_stream} on {nc.connected_url.netloc}: has Podherd run?"
        ) from exc
    if not follow and info.state.messages == 0:
        return
    sub = await js.subscribe(subject, ordered_consumer=True)
    read = 0
    try:
        while True:
            try:
                # A job's records may be none at all (a second says so); once they flow, a pause is a stall.
                msg = await sub.next_msg(timeout=3600 if follow else (STALL_S if read else 1.0))
            except (TimeoutError, nats.errors.TimeoutError):
                if follow:
                    continue
                if read:
                    raise AuditStalled(
                        f"the audit stream {subjects.audit_stream} stopped delivering after {read} records"
                        " (a JetStream leader election?): try again"
                    ) from None
                return
            read += 1
            yield msg.data
            if not follow and msg.metadata.num_pending == 0:
                return
    finally:
        with contextlib.suppress(Exception):
            await sub.unsubscribe()


def now_utc() -> datetime:
    return datetime.now(UTC)


async def gather_replies(
    nc: Any, sender: Sender, intents: list[MigrationIntent], *, within: float
) -> list[IntentReply]:
    return list(await asyncio.gather(*(request_intent(nc, sender, i, within=within) for i in intents)))


def show_record(record: Any) -> None:
    """One audit record of a followed job, as a line: time, job, phase or action, reason, message."""
    what = record.phase or record.action
    why = f" {record.reason}" if record.reason else ""
    text = f": {record.message}" if record.message else ""
    print(f"{record.time:%H:%M:%S} {record.job} {what}{why}{text}", flush=True)
