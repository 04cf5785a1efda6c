"""What each memory lever saves on one idle lab cluster, one lever at a time, beside today's flags.

Run:  .venv/bin/python benchmarks/memory_levers.py [--rounds 5] [--settle 10] [--lever NAME ...]

Each round brings the bare ``sandbox`` lab up once per configuration: today's flags, and today's flags
plus one lever. The order reverses every round, so that each configuration meets the same machine. After
``--settle`` seconds it reads the resident memory (RSS) of each of the five component processes, how
much of it is their own (anonymous) memory rather than code mapped from the binaries, and the CPU
time they have spent so far (starting, mostly: a lever that makes garbage collection more eager costs
CPU there). Then it reads the CPU time they spend over the next ``--settle`` seconds (an idle cluster
should spend almost none: a soft memory limit set too low shows up here, as garbage collection that
never stops), and takes the cluster down. A configuration whose cluster does not come up is reported
as failed, with the reason.

The levers only add flags or environment variables to the kwokctl configuration the course writes
(``KwokProvider.config_document``), for this process alone. Nothing here changes what ``up`` does
elsewhere: a lever that pays is adopted in ``krmcourse/providers/kwok.py`` and then has to pass the
whole suite.

It prints a table of medians (MiB per component) and writes the figures as JSON to benchmarks/results/.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable
from typing import Any

import psutil
from record import anonymous_mib, save  # benchmarks/record.py: run as a script, this folder is on sys.path

from krmcourse import Lab, toolchain
from krmcourse.errors import KrmcourseError
from krmcourse.providers.kwok import COMPONENTS, KwokProvider

#: kube-controller-manager controllers that a lab on simulated nodes has nothing for: volumes, cloud,
#: certificate signing, dynamic resources, storage migration and the replication controller.
IDLE_CONTROLLERS = (
    "cloud-node-lifecycle-controller", "node-route-controller", "service-lb-controller",
    "persistentvolume-attach-detach-controller", "persistentvolume-expander-controller",
    "ephemeral-volume-controller", "volumeattributesclass-protection-controller",
    "resourceclaim-controller", "resourcepoolstatusrequest-controller", "device-taint-eviction-controller",
    "certificatesigningrequest-approving-controller", "certificatesigningrequest-cleaner-controller",
    "certificatesigningrequest-signing-controller", "kube-apiserver-serving-clustertrustbundle-publisher-controller",
    "podcertificaterequest-cleaner-controller", "storage-version-migrator-controller",
    "storageversion-garbage-collector-controller", "replicationcontroller-controller",
    "endpointslice-mirroring-controller", "legacy-serviceaccount-token-cleaner-controller",
)

#: API groups no lab's manifests, notebooks or controllers use, and the control plane can do without (the
#: governor's HorizontalPodAutoscaler is autoscaling's, so that lab would turn it back on). Others are
#: unused by the labs but not by the API server itself: without networking.k8s.io it exits at start
#: (its Service IP repair needs IPAddress), and node.k8s.io serves the RuntimeClass admission plugin.
UNUSED_GROUPS = ("autoscaling/v1", "autoscaling/v2", "certificates.k8s.io/v1")

#: Each lever: component -> ("arg" or "env", key, value) additions to today's configuration.
LEVERS: dict[str, dict[str, list[tuple[str, str, str]]]] = {
    "today": {},
    "GOMEMLIMIT, all at about 0.6x": {
        "kube-apiserver": [("env", "GOMEMLIMIT", "150MiB")],
        "kube-controller-manager": [("env", "GOMEMLIMIT", "60MiB")],
        "kube-scheduler": [("env", "GOMEMLIMIT", "36MiB")],
        "kwok-controller": [("env", "GOMEMLIMIT", "30MiB")],
        "etcd": [("env", "GOMEMLIMIT", "24MiB")],
    },
    "GOMEMLIMIT 200MiB, API server": {"kube-apiserver": [("env", "GOMEMLIMIT", "200MiB")]},
    "GOMEMLIMIT 220MiB, API server": {"kube-apiserver": [("env", "GOMEMLIMIT", "220MiB")]},
    "fewer controllers": {
        "kube-controller-manager": [("arg", "controllers", ",".join(["*", *(f"-{c}" for c in IDLE_CONTROLLERS)]))],
    },
    "no watch cache": {"kube-apiserver": [("arg", "watch-cache", "false")]},
    "no priority and fairness": {"kube-apiserver": [("arg", "enable-priority-and-fairness", "false")]},
    "etcd snapshot-count 1000": {"etcd": [("arg", "snapshot-count", "1000")]},
    "unused API groups off": {
        "kube-apiserver": [("arg", "runtime-config", ",".join(f"{g}=false" for g in UNUSED_GROUPS))],
    },
    "GOGC 25": {c: [("env", "GOGC", "25")] for c in COMPONENTS},
    # Adopted on 2026-12-05 (the API server's GOGC is 25 since): this lever measures the way back.
    "API server at GOGC 50, as before": {"kube-apiserver": [("env", "GOGC", "50")]},
    # A soft limit instead of an eager collector: GOGC 100 while the heap is small (the API server's start),
    # and collections as eager as needed to stay under the limit once it has grown.
    "API server at GOGC 100": {"kube-apiserver": [("env", "GOGC", "100")]},
    "API server at GOGC 100 under GOMEMLIMIT 128MiB": {
        "kube-apiserver": [("env", "GOGC", "100"), ("env", "GOMEMLIMIT", "128MiB")]},
    "API server at GOGC 100 under GOMEMLIMIT 150MiB": {
        "kube-apiserver": [("env", "GOGC", "100"), ("env", "GOMEMLIMIT", "150MiB")]},
}


def with_lever(lever: dict[str, list[tuple[str, str, str]]]) -> Callable[..., list[dict[str, Any]]]:
    """KwokProvider.config_document, plus the lever's flags and environment variables."""
    original = KwokProvider.config_document

    def config_document(self: KwokProvider, options: Any) -> list[dict[str, Any]]:
        docs = original(self, options)
        for patch in docs[0]["componentsPatches"]:
            for kind, key, value in lever.get(patch["name"], []):
                # New lists: the patches share some (the leader-elect flag), and a lever is for one component.
                if kind == "arg":
                    patch["extraArgs"] = [*patch.get("extraArgs", []), {"key": key, "value": value}]
                else:
                    kept = [e for e in patch.get("extraEnvs", []) if e["name"] != key]  # a lever's value wins
                    patch["extraEnvs"] = [*kept, {"name": key, "value": value}]
        return docs

    return config_document


def measure(name: str, settle: float) -> dict[str, Any]:
    original = KwokProvider.config_document
    KwokProvider.config_document = with_lever(LEVERS[name])  # type: ignore[method-assign]
    lab = Lab("sandbox", instance="levers", say=lambda _m: None)
    try:
        lab.down()
        started = time.monotonic()
        lab.up()
        up = time.monotonic() - started
        time.sleep(settle)
        procs = {c: psutil.Process(pid) for c, pid in lab.component_pids().items()}
        full = {c: p.memory_full_info() for c, p in procs.items()}
        rss = {c: m.rss / 2**20 for c, m in full.items()}
        before = {c: sum(p.cpu_times()[:2]) for c, p in procs.items()}
        time.sleep(settle)
        cpu = sum(sum(p.cpu_times()[:2]) - before[c] for c, p in procs.items()) / settle
        return {"up_s": round(up, 2), "start_cpu_s": round(sum(before.values()), 2),
                "rss_mib": {c: round(v, 1) for c, v in rss.items()},
                "anon_mib": round(anonymous_mib([p.pid for p in procs.values()]), 1),
                "total_mib": round(sum(rss.values()), 1),
                "uss_mib": round(sum(m.uss for m in full.values()) / 2**20, 1), "idle_cpu_cores": round(cpu, 3)}
    except (KrmcourseError, TimeoutError, psutil.Error) as exc:
        return {"failed": str(exc)[:400]}
    finally:
        KwokProvider.config_document = original  # type: ignore[method-assign]
        lab.down()


def side_by_side(count: int, settle: float) -> dict[str, Any]:
    """``count`` sandbox clusters at once, with today's flags: what each holds, and what they add up to.

    RSS counts every page a process has mapped, so the code of the five binaries, one copy in memory
    shared by every cluster, is counted again in each. PSS splits each shared page between the
    processes that map it; USS counts only the pages no other process has. The machine's used memory
    (page cache left out) before and after is the check on both."""
    labs = [Lab("sandbox", instance=f"side{i}", say=lambda _m: None) for i in range(count)]
    used = psutil.virtual_memory().used
    try:
        for lab in labs:
            lab.up()
        time.sleep(settle)
        added = (psutil.virtual_memory().used - used) / 2**20
        per: dict[str, list[float]] = {"rss_mib": [], "pss_mib": [], "uss_mib": []}
        for lab in labs:
            full = [psutil.Process(pid).memory_full_info() for pid in lab.component_pids().values()]
            for key in per:
                per[key].append(sum(getattr(m, key.split("_")[0]) for m in full) / 2**20)
    finally:
        for lab in labs:
            lab.down()
    return {"clusters": count, **{k: round(statistics.median(v)) for k, v in per.items()},
            "machine_used_mib_per_cluster": round(added / count)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--settle", type=float, default=10.0, help="seconds before reading memory, and of CPU")
    parser.add_argument("--lever", action="append", choices=[n for n in LEVERS if n != "today"],
                        help="measure only these levers (repeatable); default: all")
    parser.add_argument("--side-by-side", type=int, default=0, metavar="N",
                        help="instead, bring N clusters up at once and report each one's RSS, PSS and USS")
    args = parser.parse_args()
    if not toolchain.is_installed():
        raise SystemExit("Build the toolchain first: krmcourse toolchain install")
    if args.side_by_side:
        got = side_by_side(args.side_by_side, args.settle)
        print(f"{got['clusters']} clusters side by side, medians per cluster: RSS {got['rss_mib']} MiB, "
              f"PSS {got['pss_mib']} MiB, USS {got['uss_mib']} MiB; the machine's used memory grew by "
              f"{got['machine_used_mib_per_cluster']} MiB per cluster")
        save("memory_side_by_side", {"date": time.strftime("%Y-%m-%d %H:%M"), "cpus": os.cpu_count(),
                                     "load_avg_1m_at_end": os.getloadavg()[0], **got})
        return
    names = ["today", *(args.lever or [n for n in LEVERS if n != "today"])]
    runs: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    load = os.getloadavg()[0]
    for round_ in range(args.rounds):
        for name in names if round_ % 2 == 0 else list(reversed(names)):
            runs[name].append(measure(name, args.settle))
            got = runs[name][-1]
            print(f"round {round_ + 1} {name}: " + (f"FAILED {got['failed']}" if "failed" in got else
                  f"{got['total_mib']:.0f} MiB, {got['idle_cpu_cores']:.3f} cores idle, up {got['up_s']} s"),
                  flush=True)
    medians: dict[str, dict[str, Any]] = {}
    for name, tries in runs.items():
        ok = [r for r in tries if "failed" not in r]
        if not ok:
            medians[name] = {"failed": tries[-1]["failed"]}
            continue
        medians[name] = {
            "total_mib": round(statistics.median(r["total_mib"] for r in ok)),
            "uss_mib": round(statistics.median(r["uss_mib"] for r in ok)),
            "anon_mib": round(statistics.median(r.get("anon_mib", 0) for r in ok)),
            "idle_cpu_cores": round(statistics.median(r["idle_cpu_cores"] for r in ok), 3),
            "up_s": round(statistics.median(r["up_s"] for r in ok), 2),
            "start_cpu_s": round(statistics.median(r.get("start_cpu_s", 0) for r in ok), 2),
            "rss_mib": {c: round(statistics.median(r["rss_mib"].get(c, 0) for r in ok)) for c in COMPONENTS},
            "failed_runs": len(tries) - len(ok),
        }
    print()
    short = {"kube-apiserver": "apiserver", "kube-controller-manager": "ctrl-mgr", "kube-scheduler": "scheduler",
             "kwok-controller": "kwok"}
    print(f"{'':<32}{'total':>7}" + "".join(f"{short.get(c, c):>11}" for c in COMPONENTS)
          + f"{'USS':>7}{'anon':>7}{'idle CPU':>10}{'up s':>7}{'start CPU s':>13}")
    for name, m in medians.items():
        if "failed" in m:
            print(f"{name:<32} FAILED: {m['failed'][:100]}")
            continue
        print(f"{name:<32}{m['total_mib']:>7}" + "".join(f"{m['rss_mib'][c]:>11}" for c in COMPONENTS)
              + f"{m['uss_mib']:>7}{m['anon_mib']:>7}{m['idle_cpu_cores']:>10}{m['up_s']:>7}{m['start_cpu_s']:>13}")
    save("memory_levers", {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": {"cpus": os.cpu_count(), "memory_gib": round(psutil.virtual_memory().total / 2**30),
                    "python": platform.python_version(), "load_avg_1m_at_start": load,
                    "load_avg_1m_at_end": os.getloadavg()[0]},
        "rounds": args.rounds, "settle_s": args.settle,
        "levers": {n: LEVERS[n] for n in names}, "medians": medians, "runs": runs,
    })


if __name__ == "__main__":
    main()
