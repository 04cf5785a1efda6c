"""The plumbing behind notebook 34: a folder of member kubeconfigs, the fleet controller, and checks.

The controller (``controllers/fleet.py``) learns its members from a folder: one
``<cluster>.kubeconfig`` per cluster. ``FleetRun`` keeps that folder inside the host lab's own state
folder and starts the lab's declared controller ``fleet`` there with ``lab.start``, with the let-go
step the learner saved (``lab.save_code``); the exercise's check runs a copy of its own, under
another name and in another namespace.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path
from typing import Any

import psutil

from krmcourse import apiload

HERE = Path(__file__).resolve().parent
CONTROLLER = HERE / "controllers" / "fleet.py"
NAME = "fleet"  # the controller lab.yaml declares
NS = "fleet"
MIRROR = "fleet.krmcourse.dev/mirror"
SOURCE = "fleet.krmcourse.dev/source-cluster"
KEY = re.compile(r"reconcile (\S+\|\S+) -> (\S+): (\w+) (\S+)")


def running_let_go(host: Any, name: str = NAME) -> Path | None:
    """The let-go file the host lab's running fleet controller was started with; None if none runs."""
    pid = host.running().get(name)
    if pid is None:
        return None
    try:
        argv = psutil.Process(pid).cmdline()
    except psutil.Error:
        return None
    return Path(argv[argv.index("--let-go") + 1]) if "--let-go" in argv[:-1] else None


class FleetRun:
    """The membership folder and the running controller, hosted by one lab (its logs live there).

    ``name`` is the lab's declared controller ``fleet`` unless another is given: a private copy, run
    with ``lab.run_controller``, over its own folder and ``namespace``.
    """

    def __init__(self, host: Any, name: str = NAME, namespace: str = NS) -> None:
        self.host = host
        self.name = name
        self.namespace = namespace
        self.folder = host.home / f"{name}-members"
        self.folder.mkdir(parents=True, exist_ok=True)
        self.ctl: apiload.MeteredProcess | None = None

    def start(self, let_go: Path) -> apiload.MeteredProcess:
        """Start the controller with this let-go step (or adopt it, when it already runs with it)."""
        args = ("--clusters", str(self.folder), "--let-go", str(let_go), "--namespace", self.namespace)
        if self.name == NAME:
            proc = self.host.start(NAME, *args)
        else:
            proc = self.host.run_controller(CONTROLLER, *args, name=self.name)
            proc.wait_for_log("following", timeout=30)
        self.ctl = apiload.MeteredProcess(proc, apiload.metrics_url(proc))
        return self.ctl

    @property
    def proc(self) -> Any:
        if self.ctl is None or not self.ctl.proc.alive:
            step = running_let_go(self.host, self.name)  # started since, by a solution cell, say: adopt it
            if step is not None:
                self.start(step)
        if self.ctl is None:
            raise RuntimeError(f"The {self.name} controller is not running; call start() first.")
        return self.ctl.proc

    def metrics(self) -> apiload.Metrics:
        """The controller's own Prometheus metrics, now."""
        self.proc  # noqa: B018 - adopts a controller restarted since
        assert self.ctl is not None
        return self.ctl.metrics()

    def _wait_log(self, text: str, count: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while self.proc.logs(since_start=False).count(text) < count:
            if not self.proc.alive:
                raise RuntimeError(f"The fleet controller exited. Its log:\n{self.proc.logs()[-3000:]}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"The fleet controller did not log {text!r} in {timeout:.0f} s. Its log:\n"
                                   f"{self.proc.logs()[-3000:]}")
            time.sleep(0.1)

    def join(self, name: str, kubeconfig: Path) -> None:
        """Add a member: copy its kubeconfig into the folder and wait until its cache is synced."""
        seen = self.proc.logs(since_start=False).count(f"joined {name}:")
        staging = self.folder / f".{name}.partial"  # the controller only reads *.kubeconfig
        shutil.copyfile(kubeconfig, staging)
        staging.chmod(0o600)
        os.replace(staging, self.folder / f"{name}.kubeconfig")  # appears whole, never half-written
        self._wait_log(f"joined {name}:", seen + 1)

    def leave(self, name: str) -> None:
        """Remove a member: take its kubeconfig out and wait until the controller has let it go."""
        seen = self.proc.logs(since_start=False).count(f"left {name}:")
        (self.folder / f"{name}.kubeconfig").unlink()
        self._wait_log(f"left {name}:", seen + 1)

    def actions(self) -> Any:
        """Every action the controller logged, with the cluster-aware key that caused it."""
        import pandas as pd

        rows = [{"key": m[1], "in cluster": m[2], "action": m[3], "object": m[4]}
                for m in KEY.finditer(self.proc.logs(since_start=False))]
        return pd.DataFrame(rows, columns=["key", "in cluster", "action", "object"])

    def wait_copies(self, lab: Any, want: set[str], absent: set[str] | None = None,
                    timeout: float = 30) -> dict[str, dict]:
        """Like :func:`wait_copies`, but a timeout shows the controller's log, which says why."""
        try:
            return wait_copies(lab, want, absent, timeout)
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}. The fleet controller's log ends:\n{self.proc.logs()[-3000:]}") from exc

    def kill(self) -> None:
        """SIGKILL, as a crash would: no cleanup runs."""
        self.proc.kill()

    def restart(self) -> None:
        self.proc.start()
        assert self.ctl is not None
        self.ctl.url = apiload.metrics_url(self.proc)
        self.proc.wait_for_log("following", timeout=30)

    def stop(self) -> None:
        if self.ctl is not None:
            self.ctl.stop()
        if self.name == NAME:
            self.host.stop(NAME)  # whoever started it
        shutil.rmtree(self.folder, ignore_errors=True)


def prepare_faults(lab: Any) -> list[str]:
    """For the fault harness (``converges.prepare`` in lab.yaml), which starts ``fleet`` itself, behind a fault
    proxy in front of this cluster: a membership folder whose two members are both this cluster, as the
    exercise's check has them. East goes through the proxy (a link to the kubeconfig the harness writes for it,
    ``<home>/faults/fleet.kubeconfig``, while it runs the controller); west goes direct, as ServiceAccount
    fleet/fleet-mirror, like west in the notebook. No member leaves during the faults, so the let-go step is
    the notebook's starting one. Returns the controller's arguments."""
    folder = lab.home / "fleet-fault-members"
    folder.mkdir(parents=True, exist_ok=True)
    east = folder / "east.kubeconfig"
    east.unlink(missing_ok=True)
    east.symlink_to(lab.home / "faults" / f"{NAME}.kubeconfig")
    west = folder / "west.kubeconfig"
    shutil.copyfile(lab.kubeconfig_for("fleet-mirror", NS), west)
    west.chmod(0o600)
    step = lab.save_code("let-go", "def let_go(fleet, name):\n    fleet.members.pop(name)\n")
    return ["--clusters", str(folder), "--let-go", str(step), "--namespace", NS]


def put_source(lab: Any, name: str, namespace: str = NS, **data: str) -> None:
    """A ConfigMap (in namespace fleet) that the controller should mirror to every other member."""
    lab.apply({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": namespace, "labels": {MIRROR: "true"}}, "data": data})


def copies(lab: Any, namespace: str = NS) -> dict[str, dict]:
    """The mirrored copies in one cluster: name -> data."""
    copied = lab.objects("configmaps", namespace, selector=SOURCE)
    return {item["metadata"]["name"]: item.get("data", {}) for item in copied}


def wait_copies(lab: Any, want: set[str], absent: set[str] | None = None,
                timeout: float = 30, namespace: str = NS) -> dict[str, dict]:
    """Wait until the cluster holds every copy in ``want`` and none in ``absent``; return the copies."""
    absent = absent or set()

    def settled() -> tuple[dict[str, dict]] | None:
        found = copies(lab, namespace)  # may be empty, so wrap it: wait_until waits for something truthy
        return (found,) if want <= set(found) and not absent & set(found) else None

    return lab.wait_until(settled, timeout=timeout, interval=0.3,
                          message=f"copies {sorted(want)} present and {sorted(absent)} absent in {lab.cluster}")[0]


def configmap_watches(lab: Any) -> int:
    """Watches on ConfigMaps open on this cluster's API server now, from apiserver_longrunning_requests."""
    return apiload.open_watches(lab, "configmaps")["configmaps"]


def excerpt(start: str, end: str) -> str:
    """The controller's source from the line holding ``start`` up to (not including) ``end``."""
    text = CONTROLLER.read_text()
    first = text.index(start)
    first = text.rfind("\n", 0, first) + 1
    return text[first:text.index(end, first)].rstrip()
