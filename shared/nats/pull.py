"""A durable pull consumer's messages handed over as they arrive, with pull requests kept outstanding.

nats-py's `fetch(n, timeout)` first sends a no-wait request; the server refuses it at once with `408
Requests Pending` whenever another replica's request already waits for more messages than are pending, and
nats-py then falls back to a lingering request for n messages that it waits on until n have come or the
timeout has passed. A message that arrives meanwhile sits in the client for up to the timeout: a second,
for a few messages in a hundred, in every service, whenever two replicas share a consumer.

Here, as nats.go's `Consume` does, requests for up to `window` messages stay outstanding at the server and
each message is handed over the moment it arrives; more are asked for when half the window is free
(messages asked for, waiting here, or in the caller's hands all count, so a busy replica does not take
work its idle siblings could do). A request ends at its expiry (`408 Request Timeout`) and is renewed. The
server sends an idle heartbeat on a request that has nothing to deliver: when none has come for two
heartbeats, or the connection was re-established, the requests are taken as lost and asked for again.
"""

from __future__ import annotations

import asyncio
import collections
import logging

import msgspec
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from shared.core.waits import wait_event

log = logging.getLogger(__name__)

EXPIRES = 5.0  # seconds a pull request lives at the server before it is renewed
IDLE_HEARTBEAT = 1.0  # the server's word that a request it holds has nothing to deliver
STATUS, DESCRIPTION, PENDING_MESSAGES = "Status", "Description", "Nats-Pending-Messages"
HEARTBEAT_STATUS = "100"
# Requests the server ends for good: the consumer is not there to pull from.
FATAL = frozenset({"Consumer Deleted", "Consumer is push based"})


class PullError(RuntimeError):
    """The server refused to deliver (the consumer was deleted, or is not a pull consumer)."""


class PullConsumer:
    def __init__(
        self,
        nc: NatsClient,
        stream: str,
        consumer: str,
        *,
        window: int = 256,
        expires: float = EXPIRES,
        heartbeat: float = IDLE_HEARTBEAT,
    ) -> None:
        self.nc = nc
        self.window, self.expires, self.heartbeat = window, expires, heartbeat
        self._next_subject = f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}"
        self._inbox = ""
        self._sub: Subscription | None = None
        self._requests: dict[str, int] = {}  # each request the server holds for us: how many it asked
        self._outstanding = 0  # messages asked for and not delivered yet, over all requests
        self._arrived: collections.deque[Msg] = collections.deque()
        self._in_hand = 0
        self._signal = asyncio.Event()
        self._heard = 0.0  # loop time of the server's last word on a request of ours
        self._serial = 0
        self._reconnects = 0
        self._refused: str | None = None
        self._interrupted = False

    async def start(self) -> None:
        self._inbox = self.nc.new_inbox()
        self._reconnects = self._reconnect_count()
        self._sub = await self.nc.subscribe(f"{self._inbox}.*", cb=self._on_message)

    async def batch(self, limit: int, wait: float, *, linger: float = 0.0) -> list[Msg]:
        """What has arrived, up to `limit` messages, waiting up to `wait` seconds for the first, then up to
        `linger` seconds for more to come with it. They are in the caller's hands until it says `done`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        while not self._arrived:
            await self._keep_asked()
            self._signal.clear()
            if self._arrived:
                break
            remaining = deadline - loop.time()
            if remaining <= 0 or self._interrupted:
                return []
            await wait_event(self._signal, min(remaining, self.heartbeat))
        if linger > 0 and len(self._arrived) < limit:
            await asyncio.sleep(linger)
        taken = [self._arrived.popleft() for _ in range(min(limit, len(self._arrived)))]
        self._in_hand += len(taken)
        await self._keep_asked()
        return taken

    async def done(self, count: int) -> None:
        """`count` messages the caller had were acknowledged (or handed back)."""
        self._in_hand = max(0, self._in_hand - count)
        await self._keep_asked()

    def interrupt(self) -> None:
        """The reader is stopping: a `batch` waiting for its first message returns now, empty."""
        self._interrupted = True
        self._signal.set()

    async def flush(self) -> None:
        """Whatever was sent (acks, naks) reaches the server, if the connection is still up."""
        try:
            await self.nc.flush(timeout=5)
        except Exception as exc:  # closed, or reconnecting: the server redelivers what it did not hear of
            log.debug("pull consumer: flush failed: %s", exc)

    def waiting(self) -> list[Msg]:
        """Messages that arrived and wait to be taken (the caller keeps them in progress too)."""
        return list(self._arrived)

    async def close(self) -> list[Msg]:
        """Stop asking; returns the messages that arrived and were never taken (to be handed back)."""
        if self._sub is not None:
            sub, self._sub = self._sub, None
            try:
                await sub.unsubscribe()
            except Exception as exc:  # the connection is closing: the server forgets the interest anyway
                log.debug("pull consumer: unsubscribe failed: %s", exc)
        left, self._arrived = list(self._arrived), collections.deque()
        return left

    def _reconnect_count(self) -> int:
        return int(self.nc.stats.get("reconnects", 0))

    async def _keep_asked(self) -> None:
        if self._refused is not None:
            refused, self._refused = self._refused, None
            raise PullError(f"the server refused to deliver: {refused}")
        now = asyncio.get_running_loop().time()
        reconnects = self._reconnect_count()
        if self._requests and (reconnects != self._reconnects or now - self._heard > 2.5 * self.heartbeat):
            log.debug("pull consumer %s: outstanding requests lost; asking again", self._next_subject)
            self._requests.clear()
            self._outstanding = 0
        self._reconnects = reconnects
        free = self.window - self._outstanding - len(self._arrived) - self._in_hand
        if free <= 0 or (self._requests and free < self.window // 2):
            return
        if not self._requests:
            self._heard = now  # the heartbeat clock starts with the first request outstanding
        self._serial += 1
        token = str(self._serial)
        self._requests[token] = free
        self._outstanding += free
        request = {
            "batch": free,
            "expires": int(self.expires * 1e9),
            "idle_heartbeat": int(self.heartbeat * 1e9),
        }
        await self.nc.publish(
            self._next_subject, msgspec.json.encode(request), reply=f"{self._inbox}.{token}"
        )

    async def _on_message(self, msg: Msg) -> None:
        """Messages come with their own subject; a request's statuses on its reply subject (our token)."""
        self._heard = asyncio.get_running_loop().time()
        headers = msg.headers or {}
        status = headers.get(STATUS)
        if status is None:
            # Delivered for a request given up on, it is still a message to handle and acknowledge.
            self._outstanding = max(0, self._outstanding - 1)
            if not self._outstanding:
                self._requests.clear()  # every one delivered all it asked for
            self._arrived.append(msg)
            self._signal.set()
            return
        if status == HEARTBEAT_STATUS:
            return
        # The request is over: expired (408), or ended by the server (409: a shutdown, a deleted consumer).
        # It says how many of its messages it did not deliver; without that word, count them all undelivered.
        asked = self._requests.pop(msg.subject[len(self._inbox) + 1 :], None)
        if asked is not None:
            undelivered = headers.get(PENDING_MESSAGES)
            self._outstanding = max(0, self._outstanding - (int(undelivered) if undelivered else asked))
        if not self._requests:
            self._outstanding = 0
        if headers.get(DESCRIPTION, "") in FATAL:
            self._refused = f"{status} {headers.get(DESCRIPTION)}"
        self._signal.set()
