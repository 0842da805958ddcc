"""The house as its imports draw it (scripts/house.py): rooms, arrows, floors and circles of a package."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import house


def test_a_loop_of_imports_is_a_circle_and_a_chain_stands_in_floors() -> None:
    drawn = {"a": {"b"}, "b": {"c"}, "c": set(), "x": {"y"}, "y": {"x", "c"}}
    assert house.circles(drawn) == [["x", "y"]]
    floors = house.floors(drawn)
    assert (floors["c"], floors["b"], floors["a"]) == (1, 2, 3)


def test_rooms_are_what_lies_right_under_the_package_and_imports_of_other_packages_draw_nothing(
    tmp_path: Path,
) -> None:
    package = tmp_path / "pkg"
    (package / "inner").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "inner" / "__init__.py").write_text("")
    (package / "inner" / "deep.py").write_text("from pkg import top\nimport os\n")
    (package / "top.py").write_text("from pkg.inner.deep import x\nfrom other.mod import y\n")
    lines, drawn = house.arrows("pkg", tmp_path)
    assert drawn == {"inner": {"top"}, "top": {"inner"}}
    assert lines == {"inner": 2, "top": 2}
    assert house.report("pkg", tmp_path).splitlines()[0] == "pkg: 2 rooms, 2 floors, 2 arrows, 1 circles"
