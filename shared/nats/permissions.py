"""Each NATS user's rights, made from the subjects themselves (pure): one user per service with only the
subjects and JetStream API calls that service uses, and the users of those outside (senders of intents,
readers of the audit stream). `deploy/nats/accounts.conf` is this, for the prefix `podherd`; a test keeps
the two equal.

Users are named as the NATS server maps a TLS client certificate to one (`verify_and_map`): by the
certificate's subject, `CN=<name>`. JetStream is reached through its API subjects, so a service may create
and read only the streams and consumers it works with: the watcher cannot command the executor, the
executor cannot publish a watch event, a sender of intents can do nothing else.
"""

from __future__ import annotations

import json
from typing import Any

from shared.nats.bus import COMMAND_STEPS, DECISION_STEPS, KICK_STEP, REPORT_STEP, Subjects, kv_stream

SERVICES = ("watcher", "arbitrator", "executor", "tracker", "planner")
INTENT_SENDER = "podherd-intent-sender"
AUDITOR = "podherd-auditor"
OPERATOR = "podherd-operator"  # the `podherd` CLI of a person: intents and drains, and the audit stream
EVERY_ONE = ["$JS.API.INFO", "$JS.API.STREAM.NAMES"]
INBOX = "_INBOX.>"


def user_name(service: str) -> str:
    """The TLS subject a service's certificate carries, which the NATS server maps to its user."""
    return f"CN=podherd-{service}"


def _stream(name: str, *, create: bool = True, consume: bool = True, read: bool = False) -> list[str]:
    """The JetStream API subjects of one stream: made (and its settings updated), consumed, read by
    sequence or subject (`read`)."""
    calls = [f"$JS.API.STREAM.INFO.{name}"]
    if create:
        calls += [f"$JS.API.STREAM.CREATE.{name}", f"$JS.API.STREAM.UPDATE.{name}"]
    if consume:
        calls += [
            f"$JS.API.CONSUMER.CREATE.{name}",
            f"$JS.API.CONSUMER.CREATE.{name}.>",
            f"$JS.API.CONSUMER.DURABLE.CREATE.{name}.>",
            f"$JS.API.CONSUMER.INFO.{name}.>",
            f"$JS.API.CONSUMER.DELETE.{name}.>",
            f"$JS.API.CONSUMER.MSG.NEXT.{name}.>",
            f"$JS.ACK.{name}.>",
            f"$JS.FC.{name}.>",  # an ordered consumer's flow-control answers
        ]
    if read:
        calls += [f"$JS.API.STREAM.MSG.GET.{name}", f"$JS.API.DIRECT.GET.{name}"]
        calls.append(f"$JS.API.DIRECT.GET.{name}.>")
    return calls


def _kv(bucket: str) -> list[str]:
    """A KV bucket, wholly: made, read, written, watched."""
    return [*_stream(kv_stream(bucket), read=True), f"$KV.{bucket}.>"]


def _work_streams(s: Subjects) -> list[str]:
    """Every service makes sure the work streams exist at start (whichever starts first)."""
    names = (s.jobs_stream, s.intents_stream, s.audit_stream, s.dlq_stream)
    return [call for name in names for call in _stream(name, consume=False)]


def service_permissions(s: Subjects) -> dict[str, dict[str, Any]]:
    p = s.prefix
    audit_and_dead = [f"{p}.audit.>", f"{p}.dlq.>"]
    publish = {
        "watcher": [
            f"{p}.events.>",
            *_stream(s.events_stream, read=True),
            *_kv(s.watch_bucket),
            *_kv(s.lease_bucket),
        ],
        "arbitrator": [
            *(s.jobs_at(step) for step in DECISION_STEPS),
            *audit_and_dead,
            *_stream(s.events_stream, read=True),
            *_work_streams(s),
        ],
        "executor": [
            s.jobs_at(REPORT_STEP),
            *audit_and_dead,
            *_stream(s.jobs_stream),
            *_work_streams(s),
        ],
        "tracker": [
            *(s.jobs_at(step) for step in (*COMMAND_STEPS, KICK_STEP)),
            s.ledger_released,
            s.job_unlocked,
            *audit_and_dead,
            INBOX,  # the answers to requests
            *_stream(s.events_stream, read=True),
            *_stream(s.jobs_stream),
            *_stream(s.intents_stream),
            f"$JS.API.STREAM.MSG.DELETE.{s.intents_stream}",  # a token sent into the stream is erased
            *_kv(s.collected_bucket),
            *_work_streams(s),
        ],
        # Its moves as intent requests (any namespace with a token; one namespace's with subject
        # authorization), and its lease.
        "planner": [s.intent_request, s.namespaced_intent_requests, *_kv(s.lease_bucket)],
    }
    subscribe = {
        "watcher": [INBOX],
        "arbitrator": [INBOX, s.ledger_released],
        "executor": [INBOX],
        "tracker": [
            INBOX,
            s.intent_request,
            s.namespaced_intent_requests,
            s.drain_request,
            s.job_unlocked,
            s.events_of("serviceaccounts"),
        ],
        "planner": [INBOX],
    }
    return {
        user_name(service): {
            "publish": {"allow": sorted(set(publish[service] + EVERY_ONE))},
            "subscribe": {"allow": sorted(set(subscribe[service]))},
        }
        for service in SERVICES
    }


def outside_permissions(s: Subjects) -> dict[str, dict[str, Any]]:
    """Senders of intents (requests, the stream: scope them to namespaces by copying this user with
    `<prefix>.intents.<ns>` and `<prefix>.intent.request.<ns>` only) and readers of the audit stream."""
    send = [
        s.intent_request,
        s.namespaced_intent_requests,
        s.drain_request,
        s.all_intents,
        f"$JS.API.STREAM.INFO.{s.intents_stream}",
    ]
    read = [*EVERY_ONE, *_stream(s.audit_stream, create=False, read=True)]
    return {
        f"CN={INTENT_SENDER}": {"publish": {"allow": send}, "subscribe": {"allow": [INBOX]}},
        f"CN={AUDITOR}": {"publish": {"allow": read}, "subscribe": {"allow": [INBOX, s.all_audit]}},
        f"CN={OPERATOR}": {"publish": {"allow": send + read}, "subscribe": {"allow": [INBOX, s.all_audit]}},
    }


def accounts(s: Subjects, account: str = "PODHERD") -> dict[str, Any]:
    """The `accounts` block of a nats-server configuration: one JetStream account holding every user."""
    users = {**service_permissions(s), **outside_permissions(s)}
    return {
        account: {
            "jetstream": "enabled",
            "users": [{"user": name, "permissions": rights} for name, rights in users.items()],
        }
    }


HEADER = """\
# NATS accounts for Podherd: `podherd config --nats-accounts` writes this (for another subject prefix too;
# a test keeps this file equal to it). Include it in nats-server.conf beside a TLS block that requires and
# maps client certificates:
#   tls { cert_file: …, key_file: …, ca_file: …, verify_and_map: true }
# Each user is the subject of a client certificate from that CA: CN=podherd-<service> for the services (each
# with only its own subjects and JetStream calls), CN=podherd-intent-sender for systems that send intents
# (copy it per system to scope one to `<prefix>.intents.<ns>` and `<prefix>.intent.request.<ns>`),
# CN=podherd-auditor for readers of the audit stream, and CN=podherd-operator for a person's `podherd` CLI
# (both). A certificate of no user here cannot connect.
"""


def accounts_file(s: Subjects) -> str:
    """`accounts.conf` (JSON is nats-server configuration syntax too)."""
    return HEADER + "accounts: " + json.dumps(accounts(s), indent=2) + "\n"
