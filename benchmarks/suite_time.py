"""The whole suite's wall time at two commits, side by side, from the same clean start.

Run:  .venv/bin/python benchmarks/suite_time.py BEFORE [AFTER] [--rounds 1] [--provider kwok]
                                                [--also ARGS | --same-tests]

Each commit is cloned afresh from this repository into a temporary folder and installed there
(``./course install``: its own .venv; the compiled toolchain in the user cache is shared when the pins
agree, as on any machine that has run the course before). The install is not timed. Then
``./course test -q`` runs in each clone, the commits alternating round by round so that both meet the
same machine, and its wall time, the CPU time of the processes it waited for (the tests, kubectl,
kwokctl; a cluster's components run detached and are not counted), and its summary line are kept.
Run it on an otherwise idle machine: it prints the load average before and after each run.
``--also "-m 'not faults'"`` adds, each round, a run of AFTER with those pytest arguments: the later
suite without the tests that the earlier one did not have, when the suite has grown in between.
``--same-tests`` runs, at each commit, only the tests both commits have (by test id; a notebook by its
file, since its cells are its tests and change with it) in place of the whole suites: the same work,
before and after, when the suite has grown.

It prints a table and writes the figures as JSON to benchmarks/results/.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from record import save  # benchmarks/record.py: run as a script, this folder is on sys.path

ROOT = Path(__file__).resolve().parent.parent


def cpu_seconds() -> float:
    t = os.times()
    return t.children_user + t.children_system


def clone(rev: str, into: Path) -> str:
    """A fresh clone of this repository at ``rev``, installed; returns the full commit id."""
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(into)], check=True)
    subprocess.run(["git", "-C", str(into), "checkout", "--quiet", rev], check=True)
    subprocess.run([str(into / "course"), "install"], cwd=into, check=True, capture_output=True)
    return subprocess.run(["git", "-C", str(into), "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()


def run_suite(folder: Path, env: dict[str, str], extra: list[str]) -> dict[str, object]:
    load = os.getloadavg()[0]
    wall, cpu = time.perf_counter(), cpu_seconds()
    done = subprocess.run([str(folder / "course"), "test", "-q", *extra], cwd=folder, env=env, capture_output=True,
                          text=True)
    wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
    last = (done.stdout.strip().splitlines() or ["(no output)"])[-1]
    return {"wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "exit": done.returncode, "result": last,
            "load_before": load, "load_after": os.getloadavg()[0]}


def collected(folder: Path, env: dict[str, str]) -> list[str]:
    """The ids of the tests ``./course test`` would run in ``folder``: a notebook by its file."""
    done = subprocess.run([str(folder / "course"), "test", "--collect-only", "-q", "-n", "0"], cwd=folder, env=env,
                          capture_output=True, text=True, check=True)
    ids = [line.strip() for line in done.stdout.splitlines() if "::" in line]
    return list(dict.fromkeys(i.split("::")[0] if i.split("::")[0].endswith(".ipynb") else i for i in ids))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before", help="the earlier commit")
    parser.add_argument("after", nargs="?", default="HEAD", help="the later commit (default: HEAD)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--provider", default="kwok")
    parser.add_argument("--also", default="", help="pytest arguments for one more run of AFTER each round")
    parser.add_argument("--same-tests", action="store_true", help="run only the tests both commits have")
    args = parser.parse_args()
    env = {**os.environ, "KRMCOURSE_PROVIDER": args.provider}
    env.pop("VIRTUAL_ENV", None)
    result: dict[str, object] = {"date": time.strftime("%Y-%m-%d %H:%M"), "machine": platform.node(),
                                 "cpus": os.cpu_count(), "provider": args.provider}
    work = Path(tempfile.mkdtemp(prefix="krmcourse-suite-time-"))
    try:
        folders = {"before": work / "before", "after": work / "after"}
        commits = {way: clone(rev, folders[way]) for way, rev in (("before", args.before), ("after", args.after))}
        result["commits"] = commits
        ways = {"before": [], "after": [], **({f"after {args.also}": shlex.split(args.also)} if args.also else {})}
        if args.same_tests:
            after = set(collected(folders["after"], env))
            same = [test for test in collected(folders["before"], env) if test in after]
            result["same_tests"] = {"count": len(same), "notebooks": sum(t.endswith(".ipynb") for t in same)}
            ways = {"before": same, "after": same}
        runs: dict[str, list[dict[str, object]]] = {way: [] for way in ways}
        for round_ in range(args.rounds):
            for way in list(ways) if round_ % 2 == 0 else list(reversed(ways)):
                commit = way.split()[0]
                run = run_suite(folders[commit], env, ways[way])
                runs[way].append(run)
                print(f"  {way:<7} {commits[commit][:7]} {run['wall_s']:8.1f} s wall {run['cpu_s']:8.1f} s CPU  "
                      f"load {run['load_before']:.1f}->{run['load_after']:.1f}  {run['result']}", flush=True)
        result["runs"] = runs
    finally:
        shutil.rmtree(work, ignore_errors=True)
    save("suite_time", result)


if __name__ == "__main__":
    main()
