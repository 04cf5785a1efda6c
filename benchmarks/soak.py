"""Soak: many up/down cycles across labs, some interrupted mid-up, counting what each leaves behind.

Run:  .venv/bin/python benchmarks/soak.py [--cycles 100] [--provider kwok]

Every cycle runs the real command in a state folder of the soak's own: ``krmcourse up LAB``, then
``krmcourse down LAB``. One cycle in five is interrupted while its cluster is being created: with
SIGINT (Ctrl-C: ``up`` must stop everything it started) or with SIGKILL (nothing can clean up at that
moment: the learner's next ``krmcourse down LAB`` must). After every cycle it counts:

- **processes**: any process whose program lives in the state folder, or that carries the marker of
  a process krmcourse started for a lab;
- **listening ports** of those processes;
- **files** left in the state folder (empty folders are not counted);
- **kubeconfig entries** added to the user's ``~/.kube/config`` (krmcourse must never touch it).

The goal is 0 of each. It prints the totals and writes them as JSON to benchmarks/results/.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
from record import save  # benchmarks/record.py: run as a script, this folder is on sys.path

from krmcourse.processes import MARKER

LABS = ["sandbox", "welcome", "resource-model", "custom-resources"]
CLI = [sys.executable, "-m", "krmcourse.cli"]


def ours(home: Path) -> list[psutil.Process]:
    """Processes of this soak's clusters: started from its state folder, or marked by krmcourse."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            argv = proc.info["cmdline"] or []
            if argv and argv[0].startswith(str(home)):
                found.append(proc)
            elif proc.environ().get("KRMCOURSE_HOME") == str(home) and MARKER[:-1] in proc.environ():
                found.append(proc)
        except psutil.Error:
            pass
    return found


def leaks(home: Path, kubeconfig_before: str) -> dict[str, list[str]]:
    procs = ours(home)
    ports = []
    for proc in procs:
        try:
            ports += [f"{c.laddr.ip}:{c.laddr.port}" for c in proc.net_connections("tcp") if c.status == "LISTEN"]
        except psutil.Error:
            pass
    files = sorted(str(p.relative_to(home)) for p in home.rglob("*") if not p.is_dir()) if home.exists() else []
    kube = Path.home() / ".kube" / "config"
    changed = kube.read_text() if kube.exists() else ""
    return {
        "processes": [f"{p.pid} {' '.join(p.info['cmdline'] or [])[:80]}" for p in procs],
        "ports": ports,
        "files": files,
        "kubeconfig": ["~/.kube/config changed"] if changed != kubeconfig_before else [],
    }


def interrupted_up(lab: str, env: dict[str, str], home: Path, sig: signal.Signals) -> str:
    """Start ``up``, wait until it is creating the cluster, interrupt it at a random moment after."""
    proc = subprocess.Popen([*CLI, "up", lab], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    folder = home / "labs" / f"krm-{lab}"
    deadline = time.monotonic() + 120
    while not folder.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(random.uniform(0, 2.5))  # somewhere in the middle of creating it
    if proc.poll() is None:
        proc.send_signal(sig)
    proc.wait(timeout=120)
    if sig == signal.SIGKILL:  # nothing could clean up: the learner's next command must
        subprocess.run([*CLI, "down", lab], env=env, capture_output=True, timeout=300)
    return f"up interrupted by {sig.name}" + (" and down" if sig == signal.SIGKILL else "")


def cycle(i: int, env: dict[str, str], home: Path) -> tuple[str, str]:
    lab = LABS[i % len(LABS)]
    if i % 10 == 4:
        return lab, interrupted_up(lab, env, home, signal.SIGINT)
    if i % 10 == 9:
        return lab, interrupted_up(lab, env, home, signal.SIGKILL)
    up = subprocess.run([*CLI, "up", lab], env=env, capture_output=True, text=True, timeout=600)
    if up.returncode != 0:
        print(f"  cycle {i}: up {lab} failed ({up.returncode}): {up.stderr.strip()[-300:]}")
    subprocess.run([*CLI, "down", lab], env=env, capture_output=True, timeout=300)
    return lab, "up and down" if up.returncode == 0 else f"up failed ({up.returncode}) and down"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cycles", type=int, default=100)
    parser.add_argument("--provider", default=os.environ.get("KRMCOURSE_PROVIDER", "kwok"))
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    random.seed(args.seed)
    home = Path(tempfile.mkdtemp(prefix="krmcourse-soak-"))
    env = {**os.environ, "KRMCOURSE_HOME": str(home), "KRMCOURSE_PROVIDER": args.provider}
    kube = Path.home() / ".kube" / "config"
    kubeconfig_before = kube.read_text() if kube.exists() else ""
    totals: dict[str, int] = {"processes": 0, "ports": 0, "files": 0, "kubeconfig": 0}
    kinds: dict[str, int] = {}
    first_leaks = []
    started = time.monotonic()
    for i in range(args.cycles):
        lab, what = cycle(i, env, home)
        kinds[what] = kinds.get(what, 0) + 1
        found = leaks(home, kubeconfig_before)
        for key, items in found.items():
            totals[key] += len(items)
        if any(found.values()):
            first_leaks.append({"cycle": i, "lab": lab, "what": what, **found})
            print(f"  cycle {i} ({lab}, {what}) left: {found}")
        if (i + 1) % 10 == 0:
            print(f"{i + 1} cycles in {time.monotonic() - started:.0f} s; leaks so far: {totals}")
    result = {
        "cycles": args.cycles, "provider": args.provider, "labs": LABS, "seed": args.seed,
        "kinds of cycle": kinds, "leaks": totals, "cycles with leaks": first_leaks[:20],
        "seconds": round(time.monotonic() - started), "machine": platform.node(), "cpus": os.cpu_count(),
        "load average at the end": os.getloadavg(),
    }
    print(f"{args.cycles} cycles ({kinds}): leaked {totals}")
    save("soak", result)
    if not first_leaks:
        shutil.rmtree(home, ignore_errors=True)  # else kept, for a look at what was left


if __name__ == "__main__":
    main()
