"""``krmcourse doctor``: what is missing, what is broken, and what leaked, each with the fix.

A leak is a control-plane or controller process whose cluster folder is gone, or a cluster folder
whose processes are gone. Both happen when a machine or kernel dies mid-lab.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

import psutil

from . import pins, toolchain
from .kubectl import kubectl_binary
from .lab import lock_path, recorded
from .paths import state_dir
from .processes import MARKER, kill_recorded
from .providers import Provider, owning_providers
from .providers.kind import INOTIFY_INSTANCES, NO_ENGINE_HINT, KindProvider, inotify_advice
from .providers.kwok import stop_process


@dataclass
class Finding:
    ok: bool
    what: str
    fix: str = ""


def leaked_processes() -> list[psutil.Process]:
    """Processes krmcourse started whose cluster or lab folder no longer exists."""
    # Both providers start their processes from the cluster's own folder (kwokctl links the binaries
    # into its bin/; the kind provider runs kwok from its bin/), beside the cluster's kubeconfig.
    roots = [state_dir() / "kwok" / "clusters", state_dir() / "kind"]
    leaked = []
    for proc in psutil.process_iter(["pid", "exe", "cmdline"]):
        try:
            exe = (proc.info["cmdline"] or [""])[0]
            root = next((r for r in roots if exe.startswith(str(r) + "/")), None)
            if root is not None:
                cluster = Path(exe).relative_to(root).parts[0]
                if not (root / cluster / "kubeconfig.yaml").exists():
                    leaked.append(proc)
                continue
            environ = proc.environ()
            name = environ.get(MARKER[:-1])
            kubeconfig = environ.get("KUBECONFIG", "")
            if name and kubeconfig and not Path(kubeconfig).exists():
                leaked.append(proc)
        except (psutil.Error, ValueError):
            continue
    return [p for p in leaked if p.pid != psutil.Process().pid]


def stale_clusters() -> list[tuple[Provider, str]]:
    """Clusters of this state folder whose control plane is not (fully) running, on every provider."""
    return [(p, c) for p in owning_providers() for c in p.clusters() if not all(p.health(c).values())]


def _lab_words(cluster: str) -> str:
    """How to name a cluster's lab on the command line: 'LAB' or 'LAB --instance I'."""
    record = recorded(cluster)
    if record is None:
        return cluster.removeprefix("krm-")
    lab: str = record["lab"]
    return lab + (f" --instance {record['instance']}" if record.get("instance") else "")


def examine() -> list[Finding]:
    out: list[Finding] = []
    out.append(Finding(sys.version_info >= (3, 11), f"Python {sys.version.split()[0]}",
                       "Install Python 3.11 or newer."))
    try:
        out.append(Finding(True, f"kubectl: {kubectl_binary()}"))
    except Exception as exc:  # noqa: BLE001
        out.append(Finding(False, "kubectl is missing", str(exc)))
    go = toolchain.find_go()
    have = toolchain.go_version(go) if go else None
    need = ".".join(map(str, pins.GO_MINIMUM))
    out.append(Finding(have is not None,
                       f"Go: {'.'.join(map(str, have)) + ' at ' + go if have and go else 'not found'} "
                       f"(need {need}+ to build)",
                       f"'krmcourse toolchain install' fetches Go from PyPI; or install Go {need}+, or use kind "
                       "(KRMCOURSE_PROVIDER=kind) if you have Docker."))
    for name, version, built, folder in toolchain.describe(os.environ.get("KRMCOURSE_PROVIDER") or "kwok"):
        out.append(Finding(built, f"{name} {version}: {'built in ' + str(folder) if built else 'not built'}",
                           "Run 'krmcourse toolchain install' (a cold build takes a while, once)."))
    kind = KindProvider()
    problem = kind.usable()
    wanted = os.environ.get("KRMCOURSE_PROVIDER") == "kind"
    hint = NO_ENGINE_HINT if problem and kind.engine_problem() else ""
    out.append(Finding(problem is None or not wanted,
                       "kind provider: " + ("usable" if problem is None else f"not usable ({problem})"), hint))
    if problem is None and inotify_advice():
        out.append(Finding(False, "kind: too few inotify instances per user for several kind nodes at once",
                           f"sudo sysctl fs.inotify.max_user_instances={INOTIFY_INSTANCES} (and put it in "
                           "/etc/sysctl.d/ to keep it)."))
    for provider, cluster in stale_clusters():
        down = ", ".join(c for c, ok in provider.health(cluster).items() if not ok)
        words = _lab_words(cluster)
        out.append(Finding(False, f"cluster {cluster} ({provider.name}) is broken: {down} not running",
                           f"'krmcourse reset {words}' recreates it, 'krmcourse down {words}' removes it."))
    for name in kind.orphans():
        out.append(Finding(False, f"kind cluster {name} has no state folder any more (a crashed kernel or "
                                  "test run left it)", "'krmcourse doctor --fix' deletes it."))
    saved = sorted((state_dir() / "labs").glob("*/snapshots/*.json"))
    if saved:
        mib = sum(p.stat().st_size for p in saved) / 2**20
        out.append(Finding(True, f"{len(saved)} lab snapshot(s) take {mib:.1f} MiB in {state_dir() / 'labs'} "
                                 "(each lab's 'down' removes its own)"))
    failed = sorted((state_dir() / "failed").glob("*"))
    if failed:
        out.append(Finding(True, f"{len(failed)} failed start(s) left their component logs in "
                                 f"{state_dir() / 'failed'} ('doctor --fix' removes them)"))
    for proc in leaked_processes():
        try:
            ports = sorted({c.laddr.port for c in proc.net_connections(kind="inet") if c.status == "LISTEN"})
            what = f"leaked process {proc.pid}: {' '.join(proc.cmdline()[:3])[:100]}"
        except psutil.Error:
            continue
        held = f", holding port(s) {', '.join(map(str, ports))}" if ports else ""
        out.append(Finding(False, what + held, "'krmcourse doctor --fix' stops it."))
    return out


def fix() -> list[str]:
    """Stop leaked processes and remove broken cluster folders."""
    done = []
    for proc in leaked_processes():
        # At once, and wait until it has gone: a cluster's data is disposable.
        stop_process(proc.pid, (signal.SIGKILL,))
        done.append(f"stopped leaked process {proc.pid}")
    for provider, cluster in stale_clusters():
        kill_recorded(state_dir() / "labs" / cluster / "processes")
        provider.delete(cluster)
        shutil.rmtree(state_dir() / "labs" / cluster, ignore_errors=True)
        lock_path(cluster).unlink(missing_ok=True)
        done.append(f"removed broken cluster {cluster}")
    for scratch in (state_dir() / "labs").glob("*/snapshots/*.json.new"):  # a save cut off half-way
        scratch.unlink(missing_ok=True)
        done.append(f"removed the half-written snapshot {scratch}")
    kind = KindProvider()
    for name in kind.orphans():
        kind.remove_orphan(name)
        done.append(f"deleted kind cluster {name}, whose state folder had gone")
    if (state_dir() / "failed").is_dir():
        shutil.rmtree(state_dir() / "failed")
        done.append("removed the logs of failed starts")
    return done
