"""Convergence after faults, for every reference controller: the README's controller x fault table.

Run:  .venv/bin/python benchmarks/faults.py [--rounds 3] [--jobs 1] [--only LAB/CONTROLLER ...]

For each controller a lab declares (``converges:`` in lab.yaml), on a fresh cluster at that state, it
runs every fault of :mod:`krmcourse.faults` ``--rounds`` times and keeps the seconds from the fault to
convergence. It prints a Markdown table (median and max of the rounds, "n/a" where the fault cannot
reach the controller, "FAILED" where it did not converge in two minutes) and writes the figures as
JSON to benchmarks/results/. ``--jobs N`` measures N controllers at a time, each in a process of its
own with a cluster of its own: quicker, on a busier machine (the JSON keeps the load averages).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import platform
import statistics
import time

from record import save  # benchmarks/record.py: run as a script, this folder is on sys.path

from krmcourse import catalog, faults
from krmcourse.errors import WaitTimeout


def measure(lab_name: str, controller: str, rounds: int) -> dict[str, list[float] | str]:
    began = time.monotonic()
    lab = faults.lab_for(lab_name, controller)
    found: dict[str, list[float] | str] = {}
    try:
        for _ in range(rounds):
            for fault in faults.FAULTS:
                if isinstance(found.get(fault), str):
                    continue  # n/a or failed once: not worth asking again
                try:
                    seconds = faults.converge(lab, controller, fault)
                except faults.NotApplicable as why:
                    found[fault] = f"n/a: {why}"
                except (WaitTimeout, RuntimeError) as stuck:  # RuntimeError: it did not start again
                    found[fault] = f"FAILED: {stuck}\n{lab.logs(controller, 30)}"
                else:
                    times = found.setdefault(fault, [])
                    assert isinstance(times, list)
                    times.append(round(seconds, 2))
    finally:
        lab.down()
    print(f"{lab_name}/{controller}: {time.monotonic() - began:.0f} s", flush=True)
    return found


def cell(value: list[float] | str | None) -> str:
    if isinstance(value, list):
        return f"{statistics.median(value):.1f} / {max(value):.1f}"
    return "n/a" if value is None or value.startswith("n/a") else "FAILED"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=1, help="controllers measured at the same time")
    parser.add_argument("--only", nargs="*", default=[], help="LAB/CONTROLLER pairs (default: every one)")
    args = parser.parse_args()
    pairs = [(spec.name, name) for spec in catalog.all_labs() for name in spec.controllers
             if not args.only or f"{spec.name}/{name}" in args.only]
    result: dict[str, object] = {"date": time.strftime("%Y-%m-%d %H:%M"), "machine": platform.node(),
                                 "cpus": os.cpu_count(), "provider": os.environ.get("KRMCOURSE_PROVIDER", "kwok"),
                                 "rounds": args.rounds, "jobs": args.jobs, "load_before": os.getloadavg()[0]}
    with concurrent.futures.ProcessPoolExecutor(max_workers=args.jobs) as pool:
        found = pool.map(measure, *zip(*pairs, strict=True), [args.rounds] * len(pairs))
        table = {f"{lab_name}/{controller}": row for (lab_name, controller), row in zip(pairs, found, strict=True)}
    result["load_after"] = os.getloadavg()[0]
    result["seconds"] = table
    print("\n| controller | " + " | ".join(faults.FAULTS) + " |")
    print("| --- |" + " --- |" * len(faults.FAULTS))
    for key, row in table.items():
        print(f"| {key} | " + " | ".join(cell(row.get(f)) for f in faults.FAULTS) + " |")
    for key, row in table.items():
        for fault, value in row.items():
            if isinstance(value, str):
                print(f"{key}, {fault}: {value}")
    save("faults", result)


if __name__ == "__main__":
    main()
