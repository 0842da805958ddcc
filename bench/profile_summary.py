"""Where the services' CPU goes: py-spy's collapsed stacks of a benchmark run, summed per service.

    py-spy record --subprocesses --gil --format raw -o run.raw -- python -m bench.e2e_bench --limits open
    python -m bench.profile_summary run.raw [--top 12]

`--gil` keeps the samples of threads that hold the GIL, so a thread waiting on a socket is not counted as
working. Each service's samples (all its replicas) are split by the innermost frame (self) and by every
frame of Podherd's or kubesim's own code on the stack (inclusive), as shares of that service's samples.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

SERVICE = re.compile(r"podherd run (\w+)")
OWN_CODE = re.compile(r"\((services|shared|kubesim|podherd)/")


def service_of(frames: list[str]) -> str:
    for frame in frames[:3]:
        found = SERVICE.search(frame)
        if found:
            return found.group(1)
    return "kubesim" if any("kubesim/" in f for f in frames) else "benchmark"


def summarize(lines: list[str], top: int) -> dict[str, Any]:
    own: dict[str, Counter[str]] = {}
    inclusive: dict[str, Counter[str]] = {}
    samples: Counter[str] = Counter()
    for line in lines:
        stack, _, count = line.rstrip().rpartition(" ")
        if not stack:
            continue
        frames = stack.split(";")
        service, n = service_of(frames), int(count)
        code = [f for f in frames if not f.startswith(("process ", "thread "))]
        samples[service] += n
        if code:
            own.setdefault(service, Counter())[code[-1]] += n
        for frame in set(code):
            if OWN_CODE.search(frame):
                inclusive.setdefault(service, Counter())[frame] += n
    total = sum(samples.values()) or 1

    def shares(counter: Counter[str], of: int) -> dict[str, float]:
        return {frame: round(100 * c / of, 1) for frame, c in counter.most_common(top)}

    return {
        service: {
            "share_of_all_samples_pct": round(100 * n / total, 1),
            "self_pct": shares(own.get(service, Counter()), n),
            "inclusive_pct": shares(inclusive.get(service, Counter()), n),
        }
        for service, n in samples.most_common()
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("raw", type=Path)
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args()
    print(json.dumps(summarize(args.raw.read_text().splitlines(), args.top), indent=1))


if __name__ == "__main__":
    main()
