"""A lab on kind beside the same lab on kwok: time to ready, memory, and time to take it down.

Run:  .venv/bin/python benchmarks/providers.py [--runs 5]

Both toolchains must be built (``krmcourse toolchain install --provider kind`` builds both) and a
Docker engine must answer. In one run, alternating so that both see the same machine load, it takes
``Lab("sandbox").up()`` to ready on each provider (API ready, the simulated node Ready, the default
ServiceAccount there), waits a few seconds, reads memory, and times ``down``.

Memory is counted two ways, so that the providers compare fairly:
- **RSS of the processes**: on kwok, the five component processes; on kind, every process in the node
  container (systemd, containerd, kubelet, the control plane, CoreDNS, kube-proxy...) plus kwok on
  the host;
- **the node container's memory use** as Docker reports it (its cgroup, page cache included), for kind.

It prints a table of medians and writes the figures as JSON to benchmarks/results/.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import time

import psutil
from record import save  # benchmarks/record.py: run as a script, this folder is on sys.path

from krmcourse import Lab, toolchain
from krmcourse.apiload import rss_mib
from krmcourse.providers.kind import KindProvider


def container_processes(name: str) -> list[int]:
    done = subprocess.run(["docker", "inspect", "-f", "{{.State.Pid}}", name], capture_output=True, text=True)
    root = psutil.Process(int(done.stdout))
    return [root.pid, *(p.pid for p in root.children(recursive=True))]


def container_memory_mib(name: str) -> float:
    done = subprocess.run(["docker", "stats", "--no-stream", "--format", "{{.MemUsage}}", name],
                          capture_output=True, text=True, check=True)
    used = done.stdout.split("/")[0].strip()
    units = {"KiB": 1 / 1024, "MiB": 1, "GiB": 1024, "B": 1 / 2**20}
    for unit, factor in units.items():
        if used.endswith(unit):
            return float(used[: -len(unit)]) * factor
    raise ValueError(used)


def one_run(provider: str, settle: float) -> dict[str, float]:
    lab = Lab("sandbox", instance="bench", provider=provider, say=lambda _m: None)
    lab.down()
    started = time.monotonic()
    lab.up()
    up = time.monotonic() - started
    time.sleep(settle)
    figures = {"up_s": up}
    if provider == "kind":
        node = KindProvider().node(lab.cluster)
        kwok = lab.component_pids()["kwok-controller"]
        figures["rss_mib"] = rss_mib([*container_processes(node), kwok])
        figures["container_mib"] = container_memory_mib(node)
    else:
        figures["rss_mib"] = rss_mib(list(lab.component_pids().values()))
    started = time.monotonic()
    lab.down()
    figures["down_s"] = time.monotonic() - started
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--settle", type=float, default=10.0, help="seconds to wait before reading memory")
    args = parser.parse_args()
    if not toolchain.is_installed("kind"):
        raise SystemExit("Build both toolchains first: krmcourse toolchain install --provider kind")
    runs: dict[str, list[dict[str, float]]] = {"kwok": [], "kind": []}
    load_start = os.getloadavg()[0]
    for i in range(args.runs):
        for provider in ("kwok", "kind"):
            runs[provider].append(one_run(provider, args.settle))
        print(f"run {i + 1}: " + " | ".join(
            f"{p} up {r[-1]['up_s']:.1f} s, {r[-1]['rss_mib']:.0f} MiB, down {r[-1]['down_s']:.1f} s"
            for p, r in runs.items()), flush=True)

    def median(provider: str, key: str) -> float:
        return round(statistics.median(r[key] for r in runs[provider]), 2)

    result = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": {"cpus": os.cpu_count(), "memory_gib": round(psutil.virtual_memory().total / 2**30),
                    "python": platform.python_version(), "load_avg_1m_at_start": load_start,
                    "load_avg_1m_at_end": os.getloadavg()[0]},
        "runs": args.runs,
        "medians": {p: {k: median(p, k) for k in runs[p][0]} for p in runs},
        "all": runs,
    }
    print()
    print(f"{'median':<28}{'kwok':>10}{'kind':>10}")
    for key, label in (("up_s", "up until ready (s)"), ("rss_mib", "RSS of processes (MiB)"),
                       ("down_s", "down (s)")):
        print(f"{label:<28}{result['medians']['kwok'][key]:>10}{result['medians']['kind'][key]:>10}")
    print(f"{'node container (MiB)':<28}{'-':>10}{result['medians']['kind']['container_mib']:>10}")
    save("providers", result)


if __name__ == "__main__":
    main()
