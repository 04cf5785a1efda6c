"""Control-plane components in one process instead of one each: what it would save, and cost.

Run:  .venv/bin/python benchmarks/fused_controllers.py [--rounds 5] [--settle 10] [--with-apiserver]

A measurement of a lever the course has not adopted. ``fused/main.go`` runs several Kubernetes commands
in one Go process (as k3s does with its control plane): kube-controller-manager and kube-scheduler, and
with ``--with-apiserver`` kube-apiserver as well. This script builds it once, with the Kubernetes version
and the module replacements of the course's own toolchain build (``krmcourse/toolchain.py``), into the
user cache. Each round brings the ``sandbox`` lab up, waits ``--settle`` seconds and reads the memory of
the replaced components and of the whole cluster (its five processes): RSS, and RssAnon, the private
memory each further cluster adds (RSS also counts the binaries' code, which every cluster started from
the same file shares). It times what a snapshot restore does to the control plane: kube-controller-manager
stopped and started again by kwokctl. It then replaces the components with one fused process started with
the same flags (and the first one's environment), checks that it does their jobs (a Deployment of two
Pods gets them scheduled onto the simulated node and Ready), waits as long, reads memory the same way,
and, with the API server inside, times the fused process killed and started again until the API server
is ready: what a restore would then have to do. Then it takes the lab down.

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

from krmcourse import Lab, pins, probe, toolchain
from krmcourse.paths import cache_dir
from krmcourse.providers.kwok import COMPONENTS

SOURCE = Path(__file__).resolve().parent / "fused" / "main.go"
CONTROLLERS = ("kube-controller-manager", "kube-scheduler")
WITH_APISERVER = ("kube-apiserver", *CONTROLLERS)


def build() -> Path:
    """The fused binary, built once per Kubernetes version and source."""
    out = cache_dir() / "benchmarks" / f"fused-{pins.KUBERNETES}" / "control-plane"
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
        # -checklinkname=0: main.go reaches one unexported variable of the apiserver library (it says why).
        ldflags = f"{toolchain.version_ldflags(pins.KUBERNETES)} -checklinkname=0"
        for args in (["mod", "tidy"], ["build", "-trimpath", "-ldflags", ldflags, "-o", str(out), "."]):
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


def api_ready(lab: Lab) -> bool:
    api = probe.for_kubeconfig(lab.kubeconfig)
    assert api is not None, "the kwok provider's kubeconfig names its certificate files"
    try:
        return api.ready()
    finally:
        api.close()


def start_fused(binary: Path, argv: list[list[str]], env: dict[str, str], cwd: str,
                log: Path) -> subprocess.Popen[bytes]:
    groups: list[str] = []
    for args in argv:
        groups += ["--", *args] if groups else args
    with log.open("a") as out:
        return subprocess.Popen([str(binary), *groups], env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


def stop(fused: subprocess.Popen[bytes]) -> None:
    os.killpg(fused.pid, signal.SIGKILL)
    fused.wait()


def one_round(binary: Path, together: tuple[str, ...], settle: float, log: Path) -> dict[str, Any]:
    """A fresh lab read as it runs today, then with ``together`` replaced by one fused process."""
    lab = Lab("sandbox", instance="fused", say=lambda _m: None)
    lab.down()
    lab.up()
    try:
        time.sleep(settle)
        separate, restart_s = separate_reading(lab, together)
        fused, works, fused_restart_s = fused_reading(lab, binary, together, settle, log)
        return {"separate": separate, "fused": fused, "fused_did_their_jobs": works,
                "restore_restart_s": {"separate": restart_s, "fused": fused_restart_s}}
    finally:
        lab.down()


def separate_reading(lab: Lab, together: tuple[str, ...]) -> tuple[dict[str, Any], float]:
    """Memory of the separate processes (``together``'s, and the whole cluster's), and the seconds a
    snapshot restore's restart of kube-controller-manager takes."""
    pids = lab.component_pids()
    separate = {"replaced": memory([pids[c] for c in together]), "cluster": memory(list(pids.values()))}
    started = time.monotonic()
    lab.provider.restart_component(lab.cluster, "kube-controller-manager")
    return separate, round(time.monotonic() - started, 2)


def fused_reading(lab: Lab, binary: Path, together: tuple[str, ...], settle: float,
                  log: Path) -> tuple[dict[str, Any], bool, float | None]:
    """``together`` replaced by one fused process with their flags: its memory and the cluster's, whether
    it did their jobs, and (with kube-apiserver among them) the seconds until a restarted one is ready."""
    pids = lab.component_pids()
    rest = [pids[c] for c in COMPONENTS if c not in together]
    procs = [psutil.Process(pids[c]) for c in together]
    argv = [[c, *p.cmdline()[1:]] for c, p in zip(together, procs, strict=True)]
    env, cwd = procs[0].environ(), procs[0].cwd()
    for proc in procs:
        proc.kill()
    psutil.wait_procs(procs, timeout=30)
    fused = start_fused(binary, argv, env, cwd, log)
    try:
        lab.wait_until(lambda: api_ready(lab), timeout=120, message="the fused API server is not ready")
        works = both_jobs_done(lab)
        time.sleep(settle)
        one = {"replaced": memory([fused.pid]), "cluster": memory([fused.pid, *rest])}
        restart_s = None
        if "kube-apiserver" in together:
            stop(fused)
            started = time.monotonic()
            fused = start_fused(binary, argv, env, cwd, log)
            lab.wait_until(lambda: api_ready(lab), timeout=120, interval=0.05,
                           message="the fused API server is not ready after a restart")
            restart_s = round(time.monotonic() - started, 2)
    finally:
        stop(fused)
    return one, works, restart_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--settle", type=float, default=10.0, help="seconds before reading memory")
    parser.add_argument("--with-apiserver", action="store_true", help="kube-apiserver in the fused process too")
    args = parser.parse_args()
    if not toolchain.is_installed():
        raise SystemExit("Build the toolchain first: krmcourse toolchain install")
    together = WITH_APISERVER if args.with_apiserver else CONTROLLERS
    binary = build()
    load = os.getloadavg()[0]
    runs = []
    with tempfile.TemporaryDirectory(prefix="fused-logs-") as logs:
        for round_ in range(args.rounds):
            runs.append(one_round(binary, together, args.settle, Path(logs) / f"fused-{round_}.log"))
            print(f"round {round_ + 1}: {runs[-1]}", flush=True)
    medians = {way: {part: {k: round(statistics.median(r[way][part][k] for r in runs), 1)
                            for k in ("rss_mib", "anon_mib")} for part in ("replaced", "cluster")}
               for way in ("separate", "fused")}
    restarts = {way: statistics.median(r["restore_restart_s"][way] for r in runs)
                for way in ("separate", "fused") if runs[0]["restore_restart_s"][way] is not None}
    for way in ("separate", "fused"):
        print(f"{way}: {', '.join(together)}: RSS {medians[way]['replaced']['rss_mib']} MiB, private "
              f"{medians[way]['replaced']['anon_mib']} MiB; the cluster: RSS {medians[way]['cluster']['rss_mib']} "
              f"MiB, private {medians[way]['cluster']['anon_mib']} MiB")
    print(f"the fused process did their jobs in {sum(r['fused_did_their_jobs'] for r in runs)} of {len(runs)} "
          f"rounds; restarting for a restore (s): {restarts}")
    save("fused_controllers", {"date": time.strftime("%Y-%m-%d %H:%M"), "cpus": os.cpu_count(),
                               "kubernetes": pins.KUBERNETES, "together": together, "rounds": args.rounds,
                               "settle_s": args.settle, "load_avg_1m_at_start": load,
                               "load_avg_1m_at_end": os.getloadavg()[0], "medians": medians,
                               "restore_restart_s": restarts, "runs": runs})


if __name__ == "__main__":
    main()
