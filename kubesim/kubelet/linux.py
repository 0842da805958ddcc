"""The Linux calls a container runtime makes, for kubesim's pods that run as processes: namespaces
(unshare, setns), mounts, the host name and the loopback device. Each needs root (CAP_SYS_ADMIN); where it is
missing the call raises `NamespacesUnavailable`, saying which call and why."""

from __future__ import annotations

import ctypes
import ctypes.util
import fcntl
import os
import socket
import struct
import threading

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
PR_SET_PDEATHSIG = 1
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1


class NamespacesUnavailable(OSError):
    """A namespace or mount call was refused: kubesim runs pods as processes only as root on Linux."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise NamespacesUnavailable(
            errno,
            f"{what}: {os.strerror(errno)} (kubesim runs a pod as processes in its own mount, network and UTS"
            " namespaces, which needs root with CAP_SYS_ADMIN on Linux)",
        )


def unshare(flags: int) -> None:
    _check(_libc().unshare(flags), "unshare")


def setns(fd: int, nstype: int) -> None:
    _check(_libc().setns(fd, nstype), "setns")


def mount(source: str, target: str, fstype: str | None, *, flags: int, data: str | None = None) -> None:
    result = _libc().mount(
        source.encode(),
        target.encode(),
        fstype.encode() if fstype else None,
        flags,
        data.encode() if data else None,
    )
    _check(result, f"mount {source} on {target}")


def bind(source: str, target: str, read_only: bool) -> None:
    mount(source, target, None, flags=MS_BIND | MS_REC)
    if read_only:
        mount(source, target, None, flags=MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def sethostname(name: str) -> None:
    raw = name.encode()
    _check(_libc().sethostname(raw, len(raw)), "sethostname")


def die_with_parent(signal_number: int) -> None:
    _check(_libc().prctl(PR_SET_PDEATHSIG, signal_number, 0, 0, 0), "prctl")


def loopback_up() -> None:
    """Bring `lo` of the current network namespace up: all of 127.0.0.0/8 is then local in it."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH22s", b"lo", 0, b"")
        flags = struct.unpack("16sH", fcntl.ioctl(sock, _SIOCGIFFLAGS, request)[:18])[1]
        fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack("16sH22s", b"lo", flags | _IFF_UP, b""))


def socket_in(netns: int | None, family: int = socket.AF_INET) -> socket.socket:
    """A TCP socket of the network namespace open as `netns` (this process's own for None). A namespace
    belongs to a thread, so a short-lived thread joins it, makes the socket and ends; the socket stays."""
    if netns is None:
        return socket.socket(family, socket.SOCK_STREAM)
    made: list[socket.socket] = []
    failed: list[BaseException] = []

    def make() -> None:
        try:
            setns(netns, CLONE_NEWNET)
            made.append(socket.socket(family, socket.SOCK_STREAM))
        except BaseException as exc:  # handed to the caller
            failed.append(exc)

    thread = threading.Thread(target=make, name="kubesim-netns", daemon=True)
    thread.start()
    thread.join()
    if failed:
        raise failed[0]
    return made[0]
