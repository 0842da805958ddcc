"""The NATS side of Podherd: subjects, streams and KV buckets (the publisher is shared.nats.publisher).

Subjects (prefix `p`, default `podherd`; one stream per purpose, named with the prefix upper-cased):

| stream     | subjects                                       | what                                 |
|------------|------------------------------------------------|--------------------------------------|
| `P_EVENTS` | `p.events.<kind>.<namespace or _>.<name>`      | the watcher's object events          |
| `P_INTENTS`| `p.intents.<namespace>`                        | migration intents (fire and forget)  |
|            | `p.intent.request[.<namespace>]`, `p.drain.request` | requests (core NATS, not stored)  |
| `P_JOBS`   | `p.jobs.<step>.<job>`                          | the job pipeline between services    |
| `P_AUDIT`  | `p.audit.<job>`                                | the append-only audit trail          |
| `P_DLQ`    | `p.dlq.<consumer>`                             | messages a consumer could not decode |

`<kind>` is the lower-case plural (`pods`, `podmigrationjobs`, ...). Object names may contain dots, which
NATS uses as token separators, so they are written with `_` for `.` (Kubernetes names never contain `_`,
so the mapping is one to one). Every object's events share one subject, so per-object order is the
stream's order and a consumer can filter on kind, namespace or object.

KV buckets: `P_watch` (the watcher's resourceVersion checkpoints) and `P_leases` (who is active).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar, get_args

import nats
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import (
    ConsumerConfig,
    DeliverPolicy,
    DiscardPolicy,
    KeyValueConfig,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)
from nats.js.errors import APIError, BadRequestError, NotFoundError, ServiceUnavailableError
from nats.js.kv import KeyValue

from shared.api.messages import DecisionKind, Step
from shared.config.model import NatsConfig
from shared.core.durations import parse_duration
from shared.core.waits import wait_event

log = logging.getLogger(__name__)
T = TypeVar("T")

CLUSTER_SCOPE = "_"


# The events of the configured workload kinds (`<prefix>.events.workloads.<kind>.<namespace>.<name>`): one
# subscription takes them all, whichever kinds are configured.
WORKLOADS = "workloads"


def token(text: str) -> str:
    """A Kubernetes name or namespace as one NATS subject token."""
    return text.replace(".", "_").replace("*", "_").replace(">", "_").replace(" ", "_") or CLUSTER_SCOPE


# The job pipeline's steps (`p.jobs.<step>.<job>`), each published by one service and consumed by another.
DECISION_STEPS: tuple[str, ...] = get_args(DecisionKind)  # the arbitrator's, to the tracker
COMMAND_STEPS: tuple[str, ...] = get_args(Step)  # the tracker's, to the executor
REPORT_STEP = "report"  # the executor's, to the tracker
KICK_STEP = "kick"  # the tracker's, to itself: reconcile a job now


def kv_stream(bucket: str) -> str:
    """The stream behind a KV bucket."""
    return f"KV_{bucket}"


@dataclass(frozen=True)
class Subjects:
    prefix: str

    @property
    def stream_prefix(self) -> str:
        return self.prefix.upper().replace("-", "_")

    # Events
    @property
    def events_stream(self) -> str:
        return f"{self.stream_prefix}_EVENTS"

    def event(self, kind: str, namespace: str | None, name: str) -> str:
        return f"{self.prefix}.events.{kind}.{token(namespace or CLUSTER_SCOPE)}.{token(name)}"

    def events_of(self, kind: str) -> str:
        return f"{self.prefix}.events.{kind}.>"

    @property
    def all_events(self) -> str:
        return f"{self.prefix}.events.>"

    # Intents, jobs, audit, dead letters
    @property
    def intents_stream(self) -> str:
        return f"{self.stream_prefix}_INTENTS"

    def intent(self, namespace: str) -> str:
        return f"{self.prefix}.intents.{token(namespace)}"

    @property
    def all_intents(self) -> str:
        return f"{self.prefix}.intents.>"

    @property
    def intent_request(self) -> str:
        return f"{self.prefix}.intent.request"

    def intent_request_in(self, namespace: str) -> str:
        """The request subject for migrations of one namespace's pods (what NATS permissions can scope)."""
        return f"{self.prefix}.intent.request.{token(namespace)}"

    @property
    def namespaced_intent_requests(self) -> str:
        return f"{self.prefix}.intent.request.*"

    @property
    def drain_request(self) -> str:
        """The request subject reserved for drains (a node is no namespace's)."""
        return f"{self.prefix}.drain.request"

    @property
    def jobs_stream(self) -> str:
        return f"{self.stream_prefix}_JOBS"

    def job(self, step: str, job: str) -> str:
        return f"{self.prefix}.jobs.{step}.{token(job)}"

    def jobs_at(self, step: str) -> str:
        """Every job's messages of one step (a consumer's filter)."""
        return f"{self.prefix}.jobs.{step}.>"

    def job_of(self, msg: Msg) -> str:
        """The job a job message is about, as its subject names it (`<prefix>.jobs.<step>.<job>`)."""
        return msg.subject.rsplit(".", 1)[-1]

    def step_of(self, subject: str) -> str:
        """The step a job message's subject names (`<prefix>.jobs.<step>.<job>`)."""
        return subject[len(self.prefix) + len(".jobs.") :].split(".", 1)[0]

    @property
    def audit_stream(self) -> str:
        return f"{self.stream_prefix}_AUDIT"

    def audit(self, job: str) -> str:
        return f"{self.prefix}.audit.{token(job)}"

    @property
    def all_audit(self) -> str:
        return f"{self.prefix}.audit.>"

    @property
    def dlq_stream(self) -> str:
        return f"{self.stream_prefix}_DLQ"

    def dead_letter(self, consumer: str) -> str:
        return f"{self.prefix}.dlq.{token(consumer)}"

    @property
    def ledger_released(self) -> str:
        """Core NATS (no stream): a job's slots and its statistics are written; waiting jobs may fit now."""
        return f"{self.prefix}.ledger.released"

    @property
    def job_unlocked(self) -> str:
        """Core NATS (no stream): a tracker released a job's lock that another reconcile waits for (the job's
        name as the payload)."""
        return f"{self.prefix}.tracker.unlocked"

    # KV
    @property
    def watch_bucket(self) -> str:
        return f"{self.stream_prefix}_watch"

    @property
    def lease_bucket(self) -> str:
        return f"{self.stream_prefix}_leases"

    @property
    def collected_bucket(self) -> str:
        """Names of collected jobs (each kept for `collector.dedupWindow`): intents naming them make none."""
        return f"{self.stream_prefix}_collected"


class StreamRefused(RuntimeError):
    """JetStream would not create or update one of Podherd's streams."""


_INSUFFICIENT_STORAGE = 10047
LEADER_WAIT_S = 10.0  # how long a replicated stream just made or changed is given to elect a leader


# What NATS answers while JetStream cannot yet: a server starting, a cluster electing its leaders.
TRANSIENT = (TimeoutError, nats.errors.NoRespondersError, ServiceUnavailableError)
_NO_PEERS = 10005  # "no suitable peers for placement", with the reasons it found


def not_ready_yet(exc: BaseException) -> bool:
    """Whether JetStream refused only because it cannot answer yet. A stream's replicas cannot be placed
    while a peer that just came back is still seen offline: that passes; no room for them does not."""
    if isinstance(exc, TRANSIENT):
        return True
    return isinstance(exc, APIError) and exc.err_code == _NO_PEERS and "offline" in (exc.description or "")


class SetUp:
    """A service's setup on JetStream as its readiness check sees it: not ready until `prepared` has done
    it, saying why meanwhile (a service answering while its streams cannot be made would be sent work)."""

    def __init__(self, what: str) -> None:
        self.what, self.done, self.why = what, False, "not set up yet"

    async def check(self) -> str | None:
        return None if self.done else f"{self.what}: JetStream not ready ({self.why})"


async def prepared(
    stop: asyncio.Event,
    setup: Callable[[], Awaitable[T]],
    what: str,
    *,
    delay: float = 0.25,
    state: SetUp | None = None,
) -> T | None:
    """`setup` (streams, buckets, consumers) tried again while JetStream cannot answer yet, until it is done
    or the service stops (None: stopped first, which ends the service cleanly rather than as a failure).
    `state`: where the service's readiness check reads whether it is done."""
    while not stop.is_set():
        try:
            done = await setup()
        except Exception as exc:
            if stop.is_set():
                return None
            if not not_ready_yet(exc):
                raise
            if state is not None:
                state.why = repr(exc)
            log.warning("%s: JetStream not ready (%r); trying again in %.2fs", what, exc, delay)
        else:
            if state is not None:
                state.done = True
            return done
        await wait_event(stop, delay)
        delay = min(5.0, delay * 2)
    return None


async def ensure_stream(js: JetStreamContext, config: StreamConfig) -> None:
    """Create the stream, or bring an existing one to this configuration; a replicated one, until it has
    a leader (until then a publish to it is answered "no responders")."""
    try:
        try:
            await js.add_stream(config)
        except BadRequestError as exc:
            if exc.err_code != 10058:  # stream name already in use with a different configuration
                raise
            await js.update_stream(config)
        if (config.num_replicas or 1) > 1 and config.name:
            await _until_led(js, config.name)
    except APIError as exc:
        if exc.err_code != _INSUFFICIENT_STORAGE or not config.max_bytes or config.max_bytes < 0:
            raise
        raise StreamRefused(
            f"JetStream refused stream {config.name}: {exc.description}. Its max_bytes"
            f" ({config.max_bytes} bytes, nats.streamMaxBytes) times its replicas is reserved against the"
            " server's JetStream file store (max_file_store; without one, a share of the free disk): lower"
            " nats.streamMaxBytes or give the server more store"
        ) from exc


async def _until_led(js: JetStreamContext, name: str, within: float = LEADER_WAIT_S) -> None:
    """Until the stream has elected a leader, for at most `within` seconds (then its publishers' retries
    take over). JetStream tells a client of an election only on its advisory subjects, which services'
    users may not read: its stream info is asked instead, every 100 ms."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        info = await js.stream_info(name)
        if info.cluster is None or info.cluster.leader or loop.time() >= deadline:
            return
        await asyncio.sleep(0.1)


async def ensure_events_stream(js: JetStreamContext, subjects: Subjects, config: NatsConfig) -> None:
    await ensure_stream(
        js,
        StreamConfig(
            name=subjects.events_stream,
            subjects=[subjects.all_events],
            retention=RetentionPolicy.LIMITS,
            max_age=parse_duration(config.stream_max_age),
            max_bytes=config.stream_max_bytes,
            discard=DiscardPolicy.OLD,
            storage=StorageType.FILE,
            duplicate_window=parse_duration(config.duplicate_window),
            num_replicas=config.replicas,
        ),
    )


async def ensure_work_streams(js: JetStreamContext, subjects: Subjects, config: NatsConfig) -> None:
    """The streams the pipeline's own messages travel on: jobs, intents, audit and dead letters."""
    working, keeping = parse_duration(config.stream_max_age), parse_duration(config.audit_max_age)
    for name, token_, max_age in (
        (subjects.jobs_stream, "jobs", working),
        (subjects.intents_stream, "intents", working),
        (subjects.audit_stream, "audit", keeping),
        (subjects.dlq_stream, "dlq", keeping),
    ):
        await ensure_stream(
            js,
            StreamConfig(
                name=name,
                subjects=[f"{subjects.prefix}.{token_}.>"],
                max_age=max_age,
                retention=RetentionPolicy.LIMITS,
                storage=StorageType.FILE,
                num_replicas=config.replicas,
                duplicate_window=parse_duration(config.duplicate_window),
                discard=DiscardPolicy.OLD,
            ),
        )


async def ensure_kv(
    js: JetStreamContext, bucket: str, config: NatsConfig, *, history: int = 1, ttl: float | None = None
) -> KeyValue:
    try:
        return await js.key_value(bucket)
    except (NotFoundError, BadRequestError):
        return await js.create_key_value(
            KeyValueConfig(
                bucket=bucket, history=history, ttl=ttl, storage=StorageType.FILE, replicas=config.replicas
            )
        )


class StreamUnreadable(RuntimeError):
    """A stream could not be read to its end (NATS away or not answering): what it holds is unknown, which
    is not the same as holding nothing."""


# What reading a stream meets while NATS is away: the server restarting, the connection reconnecting.
_UNREADABLE = (*TRANSIENT, nats.errors.ConnectionClosedError, nats.errors.OutboundBufferLimitError)


async def last_per_subject(
    js: JetStreamContext, stream: str, subject: str, *, batch: int = 512, wait: float = 2.0
) -> AsyncIterator[list[Any]]:
    """The last message of every subject matching `subject` in `stream` (what consumers of an event stream
    believe exists), in chunks of up to `batch`. A stream that does not exist holds nothing; one that cannot
    be read to its end (no answer, or `wait` seconds without the next message) raises StreamUnreadable:
    a consumer rebuilding its state from it must not take part of it for the whole."""
    try:
        info = await js.stream_info(stream, subjects_filter=subject)
    except NotFoundError:
        return
    except _UNREADABLE as exc:
        raise StreamUnreadable(f"stream {stream} did not answer: {exc!r}") from exc
    if not info.state.subjects:  # with a filter, the server lists the matching subjects (none: absent)
        return
    last = ConsumerConfig(deliver_policy=DeliverPolicy.LAST_PER_SUBJECT)
    try:
        sub = await js.subscribe(subject, ordered_consumer=True, config=last)
    except _UNREADABLE as exc:
        raise StreamUnreadable(f"stream {stream} did not answer: {exc!r}") from exc
    chunk: list[Any] = []
    read = 0
    try:
        while True:
            try:
                msg = await sub.next_msg(timeout=wait)
            except _UNREADABLE as exc:
                raise StreamUnreadable(
                    f"stream {stream} stopped answering after {read} of its objects on {subject}: {exc!r}"
                ) from exc
            read += 1
            chunk.append(msg)
            if len(chunk) >= batch:
                yield chunk
                chunk = []
            if msg.metadata.num_pending == 0:
                break
        if chunk:
            yield chunk
    finally:
        with contextlib.suppress(*_UNREADABLE):
            await sub.unsubscribe()
