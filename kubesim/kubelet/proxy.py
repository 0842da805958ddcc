"""kubesim's userspace kube-proxy for pods that run as processes: a listening socket in one network
namespace whose connections are carried to an address in another.

- into a pod: the pod's IP and container port, listened on in kubesim's own namespace, reach the pod's port
  inside its sandbox (so `<pod IP>:8080` works from the host as from another pod);
- out of a pod: a Service address inside the pod's sandbox (the `kubernetes` Service, the Services kubesim
  was told about) reaches the server behind it, in kubesim's namespace, round-robin over its backends.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import socket

from kubesim.kubelet import linux

log = logging.getLogger("kubesim.kubelet.proxy")
Address = tuple[str, int]
_CHUNK = 1 << 16


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(_CHUNK):
            writer.write(chunk)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


async def connect_in(
    netns: int | None, address: Address
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """An open connection to `address`, made from inside the network namespace open as `netns`."""
    loop = asyncio.get_running_loop()
    # Made on the loop (a thread joins the namespace for a moment): a socket made in an executor would be
    # lost, unclosed, when a probe's timeout cancels the wait for it.
    sock = linux.socket_in(netns)
    sock.setblocking(False)
    try:
        await loop.sock_connect(sock, address)
        return await asyncio.open_connection(sock=sock)
    except BaseException:
        sock.close()
        raise


class Forward:
    """Connections accepted at `listen` (in namespace `listen_ns`) carried to one of `targets` (in
    `target_ns`); None is kubesim's own namespace."""

    def __init__(
        self, listen_ns: int | None, listen: Address, target_ns: int | None, *, targets: list[Address]
    ) -> None:
        self.listen_ns, self.listen, self.target_ns = listen_ns, listen, target_ns
        self._targets = itertools.cycle(targets)
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        sock = linux.socket_in(self.listen_ns)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(self.listen)
        sock.listen(128)
        sock.setblocking(False)
        self._server = await asyncio.start_server(self._accepted, sock=sock)

    async def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        target = next(self._targets)
        try:
            upstream_reader, upstream_writer = await connect_in(self.target_ns, target)
        except OSError as exc:
            log.debug("proxy %s -> %s: %s", self.listen, target, exc)
            writer.close()
            return
        except BaseException:  # stopped while connecting: the accepted side is closed too
            writer.close()
            raise
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))
        finally:
            self._tasks.discard(task)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self._tasks):
                task.cancel()
            with contextlib.suppress(Exception):
                async with asyncio.timeout(1.0):
                    await self._server.wait_closed()
            self._server = None
