"""Which processes a test's child started, and whether any outlived it (from /proc, Linux)."""

from __future__ import annotations

from pathlib import Path

Proc = tuple[int, str]  # pid and start time: a pid reused by a later process is another process


def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may contain spaces: split after its end.
    return [str(pid), text[text.index("(") : text.rindex(")") + 1], *text[text.rindex(")") + 2 :].split()]


def descendants(root: int) -> dict[Proc, str]:
    """Every live process below `root`, by (pid, start time), with its command name."""
    children: dict[int, list[int]] = {}
    names: dict[int, tuple[str, str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat(int(entry.name))
        if fields is None:
            continue
        pid, ppid = int(fields[0]), int(fields[3])
        children.setdefault(ppid, []).append(pid)
        names[pid] = (fields[1].strip("()"), fields[21])
    found: dict[Proc, str] = {}
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        name, started = names[pid]
        found[(pid, started)] = name
        todo.extend(children.get(pid, []))
    return found


def alive(procs: dict[Proc, str]) -> list[str]:
    """Those still running (a zombie has ended; a reused pid is another process)."""
    left = []
    for (pid, started), name in procs.items():
        fields = _stat(pid)
        if fields is not None and fields[2] != "Z" and fields[21] == started:
            left.append(f"{name} (pid {pid})")
    return left
