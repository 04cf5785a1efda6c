"""kube-controller-manager and kube-scheduler as one process instead of two: what it would save.

Run:  .venv/bin/python benchmarks/fused_controllers.py [--rounds 3] [--settle 10]

A measurement of a lever the course has not adopted. ``fused/main.go`` runs both commands in one Go
process (as k3s does with its control plane); this script builds it once, with the Kubernetes version
and the module replacements of the course's own toolchain build (``krmcourse/toolchain.py``), into the
user cache. Each round brings the ``sandbox`` lab up, waits ``--settle`` seconds and reads the two
processes' memory: RSS, and RssAnon, the private memory each further cluster adds (RSS also counts
the binaries' code, which every cluster started from the same file shares). It then replaces them
with one fused process started with the same flags and environment, checks that it does both jobs (a
Deployment of two Pods gets them scheduled onto the simulated node and Ready), waits as long, reads
the fused process the same way, and takes the lab down.

It prints medians and writes the figures as JSON to benchmarks/results/.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
from record import anonymous_mib, save  # benchmarks/record.py: run as a script, this folder is on sys.path

from krmcourse import Lab, pins, toolchain
from krmcourse.paths import cache_dir

SOURCE = Path(__file__).resolve().parent / "fused" / "main.go"
PAIR = ("kube-controller-manager", "kube-scheduler")


def build() -> Path:
    """The fused binary, built once per Kubernetes version and source."""
    out = cache_dir() / "benchmarks" / f"fused-{pins.KUBERNETES}" / "kube-controllers"
    stamp = out.with_suffix(".source")
    if out.exists() and stamp.exists() and stamp.read_text() == SOURCE.read_text():
        return out
    go = toolchain.require_go()
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="fused-") as tmp:
        work = Path(tmp)
        (work / "go.mod").write_text("module krmcourse.local/probe\n\ngo 1.26.0\n")
        staging = toolchain.staging_modules(toolchain._download_gomod(go, "k8s.io/kubernetes", pins.KUBERNETES, work))
        (work / "go.mod").write_text(toolchain.wrapper_gomod(pins.KUBERNETES, staging))
        (work / "main.go").write_text(SOURCE.read_text())
        for args in (["mod", "tidy"], ["build", "-trimpath", "-ldflags", toolchain.version_ldflags(pins.KUBERNETES),
                                       "-o", str(out), "."]):
            subprocess.run([go, *args], cwd=work, check=True)
    stamp.write_text(SOURCE.read_text())
    return out


def memory(pids: list[int]) -> dict[str, float]:
    return {"rss_mib": round(sum(psutil.Process(p).memory_info().rss for p in pids) / 2**20, 1),
            "anon_mib": round(anonymous_mib(pids), 1)}


def both_jobs_done(lab: Lab) -> bool:
    lab.kubectl("create", "deployment", "probe", "--image=registry.example/probe:1", "--replicas=2")
    try:
        lab.wait_until(lambda: ((lab.get("deployment", "probe", "default") or {}).get("status") or {})
                       .get("readyReplicas") == 2, timeout=120, message="the probe Deployment is not Ready")
    except TimeoutError:
        return False
    return True


def one_round(binary: Path, settle: float, log: Path) -> dict[str, Any]:
    lab = Lab("sandbox", instance="fused", say=lambda _m: None)
    lab.down()
    lab.up()
    try:
        time.sleep(settle)
        pids = [lab.component_pids()[c] for c in PAIR]
        separate = memory(pids)
        procs = [psutil.Process(p) for p in pids]
        argv = [p.cmdline()[1:] for p in procs]
        env, cwd = procs[0].environ(), procs[0].cwd()
        for proc in procs:
            proc.kill()
        psutil.wait_procs(procs, timeout=30)
        with log.open("w") as out:
            fused = subprocess.Popen([str(binary), *argv[0], "--", *argv[1]], env=env, cwd=cwd, stdout=out,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        try:
            works = both_jobs_done(lab)
            time.sleep(settle)
            together = memory([fused.pid])
        finally:
            os.killpg(fused.pid, signal.SIGKILL)
            fused.wait()
        return {"separate": separate, "fused": together, "fused_did_both_jobs": works}
    finally:
        lab.down()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--settle", type=float, default=10.0, help="seconds before reading memory")
    args = parser.parse_args()
    if not toolchain.is_installed():
        raise SystemExit("Build the toolchain first: krmcourse toolchain install")
    binary = build()
    load = os.getloadavg()[0]
    runs = []
    with tempfile.TemporaryDirectory(prefix="fused-logs-") as logs:
        for round_ in range(args.rounds):
            runs.append(one_round(binary, args.settle, Path(logs) / f"fused-{round_}.log"))
            print(f"round {round_ + 1}: {runs[-1]}", flush=True)
    medians = {way: {k: round(statistics.median(r[way][k] for r in runs), 1) for k in ("rss_mib", "anon_mib")}
               for way in ("separate", "fused")}
    print(f"two processes: RSS {medians['separate']['rss_mib']} MiB, private {medians['separate']['anon_mib']} MiB; "
          f"one: RSS {medians['fused']['rss_mib']} MiB, private {medians['fused']['anon_mib']} MiB; the fused "
          f"process did both jobs in {sum(r['fused_did_both_jobs'] for r in runs)} of {len(runs)} rounds")
    save("fused_controllers", {"date": time.strftime("%Y-%m-%d %H:%M"), "cpus": os.cpu_count(),
                               "kubernetes": pins.KUBERNETES, "rounds": args.rounds, "settle_s": args.settle,
                               "load_avg_1m_at_start": load, "load_avg_1m_at_end": os.getloadavg()[0],
                               "medians": medians, "runs": runs})


if __name__ == "__main__":
    main()
