"""Who sent an intent, proven, and whether they may have it done (`intents.authorization`).

- `kubernetes`: a request carries its sender's ServiceAccount token (header `Authorization: Bearer …`),
  made for the audience `intents.audience`. The API server says who it is (TokenReview) and RBAC says what
  they may do (a SubjectAccessReview per permission, asked as that user, groups and extra). A review of a
  token is reused for `tokenCacheTTL` at most, and never past the token's own expiry, so an intent that
  waited past it is refused. An intent on the stream cannot carry a token (the stream would keep it), so
  it proves no one: it is refused, saying to send it as a request.
- `subject`: the NATS server's permissions are the authorization; the identity is the subject.
- `none`: nothing is checked; the identity is `system:anonymous`.

With `enforcement: audit` a refusal is logged and audited as what would have been refused, and the intent
goes ahead. Per requester, a token bucket (`intents.rateLimit`) bounds how fast intents are taken.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from prometheus_client import Counter

from services.tracker.intake.doors import door_refusal
from shared.access.permissions import ANONYMOUS, Identity, Need
from shared.access.reviews import TokenRefused, review_access, review_token, token_expiry
from shared.api import codec
from shared.api.codec import SchemaError
from shared.api.messages import EventHead, IntentError, IntentErrorCode
from shared.config.model import IntentsConfig
from shared.core.durations import parse_duration
from shared.core.redact import without_credentials
from shared.kube.client import KubeClient
from shared.nats import bus

log = logging.getLogger(__name__)
DECISIONS = Counter(
    "podherd_tracker_authorization_total", "Intents and drains authorized, by outcome", ["outcome"]
)
TOKEN_REVIEWS = Counter("podherd_tracker_token_reviews_total", "Token reviews, asked or reused", ["source"])
BUCKETS_KEPT = 10_000  # requesters whose rate is remembered (the least recent forgotten first)


class Forbidden(Exception):
    """An intent its sender may not have done (or not now); nothing is created for it."""

    def __init__(self, code: IntentErrorCode, message: str, who: Identity) -> None:
        super().__init__(message)
        self.error = IntentError(code=code, message=message)
        self.who = who


def bearer(headers: Mapping[str, str] | None) -> str | None:
    value = (headers or {}).get("Authorization", "")
    scheme, _, token = value.partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


def refusal_key(who: Identity | None, refusal: str | None) -> str:
    """What tells one refusal's audit record from another's (a repeat of the same is one record); empty for
    what was not refused."""
    if refusal is None:
        return ""
    return hashlib.sha256(f"{who.username if who else ''}\n{refusal}".encode()).hexdigest()[:12]


def unavailable(exc: Exception, who: Identity = ANONYMOUS) -> Forbidden:
    """The API server could not answer a review: the request is to be sent again, not refused."""
    return Forbidden("Unavailable", f"cannot review the requester now (retry): {redacted_error(exc)}", who)


def redacted_error(exc: Exception) -> str:
    return without_credentials(str(exc) or type(exc).__name__)


def subject_identity(subject: str) -> Identity:
    """Whoever the NATS server lets publish on `subject`: all that is known of a stream intent's sender."""
    return Identity(username=f"nats:{subject}")


@dataclass
class Verdict:
    """Who a request is from, and (with `enforcement: audit`) what enforcement would have refused it for."""

    who: Identity
    would_refuse: list[str] = field(default_factory=list)

    @property
    def objection(self) -> str | None:
        return "; ".join(self.would_refuse) or None


class Requesters:
    def __init__(
        self,
        kube: KubeClient,
        config: IntentsConfig,
        subjects: bus.Subjects,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.kube, self.config, self.subjects, self.clock = kube, config, subjects, clock
        self._ttl = parse_duration(config.token_cache_ttl)
        self._tokens: OrderedDict[bytes, tuple[Identity, float]] = OrderedDict()
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # user -> (tokens, at)

    async def identify(self, subject: str, headers: Mapping[str, str] | None) -> Verdict:
        """Who sent a message on `subject`; Forbidden when a token was wanted and is missing or bad, or
        TooManyRequests when a known requester sends requests faster than `intents.rateLimit`."""
        token = bearer(headers)
        stream = subject.startswith(self.subjects.all_intents.removesuffix(">"))
        if stream and token is not None:  # not a matter of authorization: refused in every mode
            raise Forbidden(
                "Forbidden",
                "an intent on the stream carried a token, which the stream would keep: it was erased; "
                f"send tokens only with requests ({self.subjects.intent_request})",
                ANONYMOUS,
            )
        verdict = Verdict(ANONYMOUS)
        try:
            verdict.who = await self._identity(subject, token, stream=stream)
        except TokenRefused as exc:
            self._decide(verdict, str(exc))
        if not stream and verdict.who != ANONYMOUS:  # the stream's consumer paces what it reads
            self._throttle(verdict.who)
        return verdict

    async def _identity(self, subject: str, token: str | None, *, stream: bool) -> Identity:
        mode = self.config.authorization
        if mode == "none":
            return ANONYMOUS
        if mode == "subject":
            return subject_identity(subject)
        if stream:
            raise TokenRefused(
                f"an intent on the stream ({subject}) proves no sender, and intents.authorization is "
                f"kubernetes: send it as a request on {self.subjects.intent_request} with a ServiceAccount "
                "token (podherd submit does), or choose intents.authorization: subject"
            )
        if token is None:
            raise TokenRefused(
                f"no token: a request carries its sender's ServiceAccount token for the audience "
                f"{self.config.audience!r} (header Authorization: Bearer …)"
            )
        try:
            return await self._reviewed(token)
        except TokenRefused as exc:
            raise TokenRefused(f"the token was refused: {exc}") from None
        except Exception as exc:  # the API server unreachable or failing: ask again later, nothing decided
            raise unavailable(exc) from exc

    async def _reviewed(self, token: str) -> Identity:
        key = hashlib.sha256(token.encode()).digest()
        now = self.clock()
        cached = self._tokens.get(key)
        if cached is not None and cached[1] > now:
            self._tokens.move_to_end(key)
            TOKEN_REVIEWS.labels("cache").inc()
            return cached[0]
        self._tokens.pop(key, None)
        TOKEN_REVIEWS.labels("api").inc()
        who = await review_token(self.kube, token, self.config.audience)
        until = min(now + self._ttl, token_expiry(token) or now + self._ttl)
        if self.config.token_cache_size and until > now:
            self._tokens[key] = (who, until)
            while len(self._tokens) > self.config.token_cache_size:
                self._tokens.popitem(last=False)
        return who

    def forget(self, event: bytes) -> None:
        """A ServiceAccount event from the watcher: a deleted account's reviews are dropped at once (its
        tokens are dead; a cached review would outlive it by up to `tokenCacheTTL`)."""
        try:
            head = codec.decode(event, EventHead)
        except SchemaError:
            return
        if head.type != "DELETED" or not head.uid:
            return
        gone = [key for key, (who, _) in self._tokens.items() if who.uid == head.uid]
        for key in gone:
            del self._tokens[key]

    def door(self, verdict: Verdict, subject: str, *, drain: bool, pod_namespace: str | None = None) -> None:
        """Whether the intent may come in on `subject` (Forbidden if not)."""
        why = door_refusal(
            self.subjects, self.config.authorization, subject, drain=drain, pod_namespace=pod_namespace
        )
        if why is not None:
            self._decide(verdict, why)

    async def authorize(self, verdict: Verdict, needs: list[Need]) -> None:
        """RBAC's word on each permission the request needs, asked as its sender: Forbidden naming what is
        missing. In `kubernetes` mode every sender is a Kubernetes identity the API server proved (an
        anonymous one only where enforcement is audit and the proof already failed)."""
        who = verdict.who
        if self.config.authorization != "kubernetes" or who == ANONYMOUS:
            return
        missing = []
        for need in needs:
            try:
                allowed, reason = await review_access(self.kube, who, need)
            except Exception as exc:
                raise unavailable(exc, who) from exc
            if not allowed:
                missing.append(f"{need}" + (f" ({reason})" if reason else ""))
        if missing:
            self._decide(verdict, f"{who.username} may not {'; nor '.join(missing)}")
        else:
            DECISIONS.labels("allowed").inc()

    def _decide(self, verdict: Verdict, why: str) -> None:
        if self.config.enforcement == "enforce":
            DECISIONS.labels("refused").inc()
            raise Forbidden("Forbidden", why, verdict.who)
        DECISIONS.labels("would_refuse").inc()
        log.warning("would refuse (enforcement: audit): %s", why, extra={"requester": verdict.who.username})
        verdict.would_refuse.append(why)

    def _throttle(self, who: Identity) -> None:
        rate = self.config.rate_limit
        if rate.qps <= 0:
            return
        now = self.clock()
        tokens, at = self._buckets.pop(who.username, (float(rate.burst), now))
        tokens = min(float(rate.burst), tokens + (now - at) * rate.qps)
        if len(self._buckets) >= BUCKETS_KEPT:
            self._buckets.popitem(last=False)
        if tokens < 1:
            self._buckets[who.username] = (tokens, now)
            DECISIONS.labels("rate_limited").inc()
            wait = (1 - tokens) / rate.qps
            raise Forbidden(
                "TooManyRequests",
                f"{who.username} sends intents faster than {rate.qps:g}/s (burst {rate.burst}); "
                f"retry in {wait:.1f}s",
                who,
            )
        self._buckets[who.username] = (tokens - 1, now)
