"""Reset, jump-to-exercise and ``up`` with snapshots, against the same calls with snapshots switched off.

Run:  .venv/bin/python benchmarks/snapshots.py [--lab composite] [--rounds 5]   (KRMCOURSE_PROVIDER picks the provider)

Each round measures, alternating the two code paths so that both meet the same machine:
- ``reset --at LAST`` (the lab's last exercise): restoring its snapshot, against ``KRMCOURSE_SNAPSHOTS=off``,
  which throws the cluster away, makes a new one and replays every earlier solution;
- ``reset``: restoring the start snapshot, against a new cluster;
- ``up`` from nothing: with snapshots it also saves the start state, so this shows what saving costs.
Before the snapshot runs of a round, the lab is taken to LAST once, untimed, so that each snapshot on
the way exists (as after a learner's first pass); then ``reset`` restores the start over that state, and
``reset --at LAST`` restores LAST over the start, so each has the objects of three exercises to change.
It prints medians and writes the figures as JSON to benchmarks/results/, with the load average before
and after.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable

from record import save  # benchmarks/record.py: run as a script, this folder is on sys.path

from krmcourse import Lab, snapshots


def timed(step: Callable[[], object]) -> float:
    started = time.monotonic()
    step()
    return round(time.monotonic() - started, 2)


def switched(on: bool) -> None:
    os.environ[snapshots.ENV] = "on" if on else "off"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lab", default="composite")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    lab = Lab(args.lab, instance="bench", say=lambda _m: None)
    last = lab.spec.exercises[-1].id
    runs: dict[str, list[float]] = {k: [] for k in ("reset --at, snapshots", "reset --at, replay",
                                                   "reset, snapshots", "reset, new cluster",
                                                   "up from nothing, snapshots", "up from nothing, off")}
    load = os.getloadavg()[0]
    try:
        for _ in range(args.rounds):
            switched(False)
            runs["reset --at, replay"].append(timed(lambda: lab.reset(at=last)))
            runs["reset, new cluster"].append(timed(lab.reset))
            lab.down()
            runs["up from nothing, off"].append(timed(lab.up))
            lab.down()
            switched(True)
            runs["up from nothing, snapshots"].append(timed(lab.up))
            lab.reset(at=last)  # untimed: the first pass, which takes each snapshot on the way
            # Each restore starts from the other's state, so that it has real work to do: the start
            # restored over the last exercise's objects, then those made again over the start.
            runs["reset, snapshots"].append(timed(lab.reset))
            runs["reset --at, snapshots"].append(timed(lambda: lab.reset(at=last)))
    finally:
        lab.down()
    medians = {k: statistics.median(v) for k, v in runs.items()}
    print(f"lab {args.lab}, provider {lab.provider.name}, {args.rounds} rounds, last exercise {last}")
    for name, values in runs.items():
        print(f"  {name:28} median {medians[name]:6.2f} s   runs {values}")
    faster = medians["reset --at, replay"] / medians["reset --at, snapshots"]
    print(f"  reset --at: {faster:.1f}x faster with snapshots")
    save("snapshots", {"lab": args.lab, "provider": lab.provider.name, "last_exercise": last,
                       "rounds": args.rounds, "runs_s": runs, "medians_s": medians, "machine": platform.node(),
                       "cpus": os.cpu_count(), "load_before": load, "load_after": os.getloadavg()[0]})


if __name__ == "__main__":
    main()
