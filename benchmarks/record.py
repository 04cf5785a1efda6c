"""Where the benchmarks keep what they measured (one JSON file per run in benchmarks/results/), and one
reading they share."""

from __future__ import annotations

import json
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def save(name: str, result: dict) -> Path:
    """Write ``result`` as results/<name>-<date>-<time>.json and say where."""
    out = HERE / "results" / f"{name}-{time.strftime('%Y%m%d-%H%M')}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"written to {out.relative_to(HERE.parent)}")
    return out


def anonymous_mib(pids: list[int]) -> float:
    """MiB of the processes' RSS that is anonymous memory (RssAnon): their own, not code mapped from a
    file, which every cluster started from the same binaries shares."""
    kib = 0
    for pid in pids:
        status = Path(f"/proc/{pid}/status").read_text().splitlines()
        kib += next(int(line.split()[1]) for line in status if line.startswith("RssAnon:"))
    return kib / 1024
