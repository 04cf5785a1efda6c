"""Where the benchmarks keep what they measured: one JSON file per run in benchmarks/results/."""

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
