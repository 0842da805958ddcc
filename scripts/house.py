"""The house as its imports draw it: a package's rooms (each module or folder right under it), their lines,
the arrows between them (a room imports another), the floors (a room stands above all it imports) and the
circles (rooms that import each other in a loop).

    python scripts/house.py shared kubesim services podherd   (from the checkout's top)
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

ROOT = Path.cwd()  # the checkout it is run in
Arrows = Mapping[str, set[str]]


def room_of(module: str, package: str) -> str | None:
    """The room of `package` a dotted module name lies in, or None outside it."""
    parts = module.split(".")
    return parts[1] if parts[0] == package and len(parts) > 1 else None


def imported(source: str) -> Iterable[str]:
    """The dotted names a module's source imports (`from a import b` gives `a.b` too: b may be a module)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def arrows(package: str, root: Path = ROOT) -> tuple[dict[str, int], dict[str, set[str]]]:
    """Each room's lines, and the rooms each room imports."""
    lines: dict[str, int] = {}
    drawn: dict[str, set[str]] = {}
    for path in sorted((root / package).rglob("*.py")):
        relative = path.relative_to(root / package)
        if relative.name == "__init__.py" and len(relative.parts) == 1:
            continue
        room = relative.parts[0].removesuffix(".py")
        source = path.read_text()
        lines[room] = lines.get(room, 0) + len(source.splitlines())
        targets = drawn.setdefault(room, set())
        for name in imported(source):
            target = room_of(name, package)
            if target not in (None, room) and _is_room(root / package, str(target)):
                targets.add(str(target))
    return lines, drawn


def _is_room(home: Path, name: str) -> bool:
    return (home / name).is_dir() or (home / f"{name}.py").is_file()


def circles(drawn: Arrows) -> list[list[str]]:
    """The rooms that import each other in a loop (strongly connected, more than one room)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(room: str) -> None:
        index[room] = low[room] = len(index)
        stack.append(room)
        for target in sorted(drawn.get(room, ())):
            if target not in index:
                visit(target)
                low[room] = min(low[room], low[target])
            elif target in stack:
                low[room] = min(low[room], index[target])
        if low[room] == index[room]:
            loop = []
            while True:
                member = stack.pop()
                loop.append(member)
                if member == room:
                    break
            if len(loop) > 1:
                found.append(sorted(loop))

    for room in sorted(drawn):
        if room not in index:
            visit(room)
    return found


def floors(drawn: Arrows) -> dict[str, int]:
    """Each room's floor: 1 for a room that imports no other, else one above the highest it imports (a room
    in a circle is counted as if the circle's back arrow were not there)."""
    floor: dict[str, int] = {}

    def of(room: str, path: frozenset[str]) -> int:
        if room in floor:
            return floor[room]
        below = [of(t, path | {room}) for t in drawn.get(room, ()) if t not in path and t != room]
        floor[room] = 1 + max(below, default=0)
        return floor[room]

    for room in drawn:
        of(room, frozenset())
    return floor


def report(package: str, root: Path = ROOT) -> str:
    lines, drawn = arrows(package, root)
    floor = floors(drawn)
    loops = circles(drawn)
    count = sum(len(targets) for targets in drawn.values())
    out = [f"{package}: {len(lines)} rooms, {max(floor.values(), default=0)} floors, {count} arrows, "
           f"{len(loops)} circles"]  # fmt: skip
    for room in sorted(lines, key=lambda r: (-floor.get(r, 0), r)):
        out.append(f"  floor {floor.get(room, 1):2}  {room:24} {lines[room]:6} lines -> "
                   f"{', '.join(sorted(drawn.get(room, ()))) or '-'}")  # fmt: skip
    out.extend(f"  circle: {' <-> '.join(loop)}" for loop in loops)
    return "\n".join(out)


if __name__ == "__main__":
    print(
        "\n".join(report(package) for package in sys.argv[1:] or ("shared", "kubesim", "services", "podherd"))
    )
