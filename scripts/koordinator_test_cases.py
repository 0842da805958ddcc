"""List the test functions and named cases of Koordinator v1.8.0's migration controller and descheduler
configuration tests, from its module in the Go module cache (`make controlplane` brings it), in the shape of
tests/data/koordinator/test-cases.txt: `file :: function[ :: case]`. Run it to see what a new Koordinator
release adds; tests/koordinator_cases.py gives each line its verdict."""

from __future__ import annotations

import re
import sys
from pathlib import Path

MODULE = Path.home() / "go/pkg/mod/github.com/koordinator-sh/koordinator@v1.8.0/pkg/descheduler"
FILES = {
    "controllers/migration": (
        "arbitrator/filter_test.go",
        "arbitrator/arbitrator_test.go",
        "arbitrator/sort_test.go",
        "controller_test.go",
        "util/util_test.go",
        "reservation/util_test.go",
        "evictor/evictor_soft_test.go",
        "controllerfinder/pods_finder_test.go",
        "assumed_cache_test.go",
        "context_test.go",
    ),
    "apis/config": (
        "v1alpha2/defaults_test.go",
        "validation/validation_pluginargs_test.go",
        "validation/validation_test.go",
    ),
}
FUNCTION = re.compile(r"^func (Test\w+)\(t \*testing\.T\)", re.MULTILINE)
CASE = re.compile(r'^\s*(?:name|desc|description):\s*"([^"]+)"', re.MULTILINE)
RUN = re.compile(r't\.Run\("([^"]+)"')


def cases(path: Path) -> list[tuple[str, str | None]]:
    text = path.read_text()
    starts = [(m.start(), m.group(1)) for m in FUNCTION.finditer(text)]
    out: list[tuple[str, str | None]] = []
    for i, (start, name) in enumerate(starts):
        body = text[start : starts[i + 1][0] if i + 1 < len(starts) else len(text)]
        out.append((name, None))
        seen: list[str] = []
        for found in [*CASE.findall(body), *RUN.findall(body)]:
            if found not in seen:
                seen.append(found)
        out.extend((name, case) for case in seen)
    return out


def main() -> int:
    if not MODULE.exists():
        print(f"Koordinator v1.8.0 is not in the Go module cache ({MODULE}): run `make controlplane`")
        return 2
    for base, files in FILES.items():
        for file in files:
            shown = file if base == "controllers/migration" else f"{base}/{file}"
            for function, case in cases(MODULE / base / file):
                print(f"{shown} :: {function}" + (f" :: {case}" if case else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
