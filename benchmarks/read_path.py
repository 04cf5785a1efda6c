"""Reading the cluster over one HTTPS connection beside a kubectl process per read, in one run.

Run:  .venv/bin/python benchmarks/read_path.py [--reads 200] [--suite tests/test_exercises.py ...] [--rounds 1]

1. Per read: ``Lab("sandbox").get("configmap", ...)`` many times each way, alternating in blocks so both
   see the same machine load: the HTTPS path (:mod:`krmcourse.reads`, the default) and the kubectl
   path it replaced (``KRMCOURSE_READS=kubectl``). Wall time and CPU time (this process and its
   children) per read. Then one refresh of the ownership tree (``collect_namespace``: discovery, then a
   list of every namespaced kind) beside the two kubectl processes a refresh ran before
   (``kubectl api-resources``, then one ``kubectl get`` of every kind).
2. With ``--suite``: ``./course test`` on the given tests or notebooks, each way, alternating, ``--rounds``
   times: wall time, CPU time of everything the run started, and its last line (the pass count).

It prints a table and writes the figures as JSON to benchmarks/results/.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from record import save  # benchmarks/record.py: run as a script, this folder is on sys.path

from krmcourse import Lab
from krmcourse.widgets.ownership import SKIPPED_RESOURCES, collect_namespace

ROOT = Path(__file__).resolve().parent.parent
WAYS = {"https": {}, "kubectl": {"KRMCOURSE_READS": "kubectl"}}


def cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), cpu_seconds()
    fn()
    return time.perf_counter() - wall, cpu_seconds() - cpu


def per_read(reads: int, blocks: int = 5) -> dict[str, dict[str, float]]:
    lab = Lab("sandbox", instance="read-path").up()
    try:
        lab.kubectl("create", "configmap", "probe-me", "-n", "default", "--from-literal=a=b")
        walls: dict[str, list[float]] = {way: [] for way in WAYS}
        cpus: dict[str, list[float]] = {way: [] for way in WAYS}
        for _ in range(blocks):
            for way, env in WAYS.items():
                os.environ.pop("KRMCOURSE_READS", None)
                os.environ.update(env)
                n = reads // blocks if way == "https" else max(1, reads // blocks // 10)  # kubectl is slow
                wall, cpu = timed(lambda n=n: [lab.get("configmap", "probe-me", "default") for _ in range(n)])
                walls[way].append(wall / n * 1000)
                cpus[way].append(cpu / n * 1000)
        os.environ.pop("KRMCOURSE_READS", None)
        result = {way: {"wall_ms": round(statistics.median(walls[way]), 2),
                        "cpu_ms": round(statistics.median(cpus[way]), 2)} for way in WAYS}
        return result | tree_refresh(lab, blocks)
    finally:
        lab.down()


def _tree_by_kubectl(lab: Lab, namespace: str) -> list[dict[str, object]]:
    """How the ownership tree read a namespace before it used the lab's connection: two kubectl processes."""
    kinds = [k for k in lab.kubectl("api-resources", "--namespaced=true", "--verbs=list", "-o", "name").split()
             if k not in SKIPPED_RESOURCES and k.split(".")[0] not in SKIPPED_RESOURCES]
    return list(json.loads(lab.kubectl("get", ",".join(kinds), "-n", namespace, "-o", "json")).get("items", []))


def tree_refresh(lab: Lab, blocks: int, refreshes: int = 4) -> dict[str, dict[str, float]]:
    """One refresh of the ownership tree, each way, in alternating blocks; both must find the same objects."""
    ways = {"tree refresh, https": lambda: collect_namespace(lab, "kube-system"),
            "tree refresh, kubectl": lambda: _tree_by_kubectl(lab, "kube-system")}
    found = {way: sorted(o["metadata"]["uid"] for o in read()) for way, read in ways.items()}
    if len(set(map(tuple, found.values()))) != 1:
        raise SystemExit(f"the two ways found different objects: {found}")
    walls: dict[str, list[float]] = {way: [] for way in ways}
    cpus: dict[str, list[float]] = {way: [] for way in ways}
    for _ in range(blocks):
        for way, read in ways.items():
            wall, cpu = timed(lambda read=read: [read() for _ in range(refreshes)])
            walls[way].append(wall / refreshes * 1000)
            cpus[way].append(cpu / refreshes * 1000)
    return {way: {"wall_ms": round(statistics.median(walls[way]), 1),
                  "cpu_ms": round(statistics.median(cpus[way]), 1)} for way in ways}


def suite(targets: list[str], rounds: int) -> dict[str, list[dict[str, object]]]:
    runs: dict[str, list[dict[str, object]]] = {way: [] for way in WAYS}
    for _ in range(rounds):
        for way, env in WAYS.items():
            env_now = {k: v for k, v in os.environ.items() if k != "KRMCOURSE_READS"} | env
            wall, cpu = time.perf_counter(), cpu_seconds()
            done = subprocess.run([str(ROOT / "course"), "test", "-q", *targets], cwd=ROOT, env=env_now,
                                  capture_output=True, text=True)
            wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
            last = (done.stdout.strip().splitlines() or ["(no output)"])[-1]
            runs[way].append({"wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "exit": done.returncode,
                              "result": last})
            print(f"  {way:<8} {wall:7.1f} s wall {cpu:7.1f} s CPU  {last}")
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reads", type=int, default=200, help="reads on the HTTPS path (a tenth as many by kubectl)")
    parser.add_argument("--suite", nargs="*", default=[], help="tests or notebooks to run each way")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    result: dict[str, object] = {"date": time.strftime("%Y-%m-%d %H:%M"), "machine": platform.node(),
                                 "cpus": os.cpu_count(), "load_before": os.getloadavg()[0]}
    reads = per_read(args.reads)
    result["per_read"] = reads
    print(f"{'per read (median)':<22}{'wall ms':>10}{'CPU ms':>10}")
    for way, row in reads.items():
        print(f"{way:<22}{row['wall_ms']:>10}{row['cpu_ms']:>10}")
    if args.suite:
        print(f"./course test {' '.join(args.suite)}, each way:")
        result["suite"] = {"targets": args.suite, "runs": suite(args.suite, args.rounds)}
    result["load_after"] = os.getloadavg()[0]
    save("read_path", result)


if __name__ == "__main__":
    main()
