"""The fault harness: a lab's declared controller, one fault, and the time until the lab has converged again.

Every controller a lab declares says in ``lab.yaml`` what it brings about (``converges:``, see
:class:`krmcourse.catalog.Convergence`). :func:`converge` runs it behind an
:class:`~krmcourse.faultproxy.ApiFaults` proxy, injects one of :data:`FAULTS`, gives it that work, and
returns the seconds until every condition holds again. ``tests/test_faults.py`` holds every reference
controller to every fault that can reach it; ``benchmarks/faults.py`` measures them for the README.

>>> lab = lab_for("claims", "binder")                          # doctest: +SKIP
>>> converge(lab, "binder", "410 Gone")                         # doctest: +SKIP
0.31
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from . import catalog
from .errors import KrmcourseError, KubectlError, UsageError, WaitTimeout
from .faultproxy import ApiFaults

if TYPE_CHECKING:
    from .catalog import Convergence
    from .lab import Lab
    from .processes import ManagedProcess

#: Each fault a controller is held to, by the name the README's table gives it (declared in the catalog, where
#: ``faces:`` names those a controller must meet).
FAULTS = catalog.FAULTS
#: How long a controller gets to open its watches before a watch fault is n/a for it; one that declares it
#: faces the fault gets longer (a loaded machine), and then fails, never n/a.
WATCH_GRACE = 5.0
WATCH_GRACE_DECLARED = 30.0


class NotApplicable(Exception):
    """The fault cannot reach this controller (a webhook has no watch; no field is declared for a rival).

    When the controller's ``converges.faces`` lists the fault, the test fails on this: it said it would
    face the fault, and no longer does (it stopped watching, or stopped writing)."""


def convergence(lab: Lab, name: str) -> Convergence:
    """What the declared controller ``name`` must bring about (``converges:`` in lab.yaml)."""
    conv = lab.spec.controller(name).converges
    if conv is None:
        raise UsageError(f"Lab {lab.name}: controller {name} declares no 'converges:'.",
                         f"Add one to {lab.path / 'lab.yaml'} (see labs/README.md).")
    return conv


def lab_for(lab_name: str, name: str) -> Lab:
    """A fresh cluster of lab ``lab_name`` for its controller ``name``, prepared (:func:`prepare`), as an
    instance of its own (``faults0``, ``faults1``: one per controller, short enough for kind's names), so
    that the controllers of one lab can be faulted side by side."""
    from .lab import Lab

    number = list(catalog.get(lab_name).controllers).index(name)
    return prepare(Lab(lab_name, instance=f"faults{number}", say=lambda _m: None), name)


def prepare(lab: Lab, name: str) -> Lab:
    """A fresh cluster where the controller ``name`` can work: the lab at ``converges.at``, and what
    ``converges.prepare`` starts beside it."""
    conv = convergence(lab, name)
    lab.reset(at=conv.at)
    if conv.prepare:
        module, _, function = conv.prepare.partition(":")
        made = getattr(lab.support(module), function)(lab)
        if isinstance(made, list | tuple):  # the controller's arguments, made for this cluster
            _args_file(lab, name).parent.mkdir(parents=True, exist_ok=True)
            _args_file(lab, name).write_text(json.dumps([str(a) for a in made]))
    return lab


def _args_file(lab: Lab, name: str) -> Path:
    return lab.home / "faults" / f"{name}.args.json"


def _args(lab: Lab, name: str) -> tuple[str, ...]:
    """The arguments ``prepare`` made for the controller, or its declared ones."""
    made = _args_file(lab, name)
    return tuple(json.loads(made.read_text())) if made.is_file() else lab.spec.controller(name).args


def converge(lab: Lab, name: str, fault: str, timeout: float = 120, program: Path | None = None) -> float:
    """Seconds from ``fault`` to convergence, for the declared controller ``name`` of a lab that is up.

    The controller runs behind an :class:`ApiFaults` proxy, with its own identity. Whatever an earlier
    run left of the work (``converges.apply`` in lab.yaml) is deleted first; then the fault comes, the
    work is applied at the moment the fault calls for, and every ``until`` must hold within
    ``timeout`` seconds (WaitTimeout otherwise: the controller did not converge). ``program`` runs in
    place of the declared script (a test's deliberately broken copy). NotApplicable when the fault
    cannot reach this controller.
    """
    if fault not in FAULTS:
        raise UsageError(f"No fault called {fault!r}.", f"The faults are: {', '.join(FAULTS)}.")
    conv = convergence(lab, name)
    if fault == "rival writer" and conv.rival is None:
        raise NotApplicable(f"{name} declares no field for a rival writer")
    with ApiFaults(lab.controller_kubeconfig(name), lab.home / "faults", name) as proxy:
        def start() -> ManagedProcess:
            spec = lab.spec.controller(name)
            if program is None:
                return lab.start(name, *_args(lab, name), kubeconfig=proxy.kubeconfig)
            proc = lab.run_controller(program, *_args(lab, name), name=name, kubeconfig=proxy.kubeconfig)
            if spec.ready:
                proc.wait_for_log(spec.ready, timeout=60)
            return proc

        proc = start()
        try:
            # What an earlier run left goes first, while the controller runs to take off its finalizers;
            # then the fault waits until the controller has done what that gave it to do (one that polls
            # is never idle: it gets 5 s).
            lab.kubectl("delete", "-f", str(conv.apply), "--ignore-not-found", "--wait=true", "--timeout=60s")
            with contextlib.suppress(WaitTimeout):
                lab.wait_until(lambda: proxy.idle_for() > 1.0, timeout=5, interval=0.1)
            began = time.monotonic()
            _inject(lab, fault, conv, proxy, proc, start)
            if fault == "rival writer":
                _converged(lab, conv, began + timeout)
                began = time.monotonic()
                _rival(lab, conv)
            _converged(lab, conv, began + timeout)
            return time.monotonic() - began
        finally:
            lab.stop(name)


def _inject(lab: Lab, fault: str, conv: Convergence, proxy: ApiFaults, proc: ManagedProcess,
            start: Callable[[], ManagedProcess]) -> None:
    """Bring the fault about, and apply the work when the fault calls for it."""
    if fault in ("watch broken off", "watch ended cleanly", "410 Gone", "events 2 s late"):
        # A controller logs that it is ready once it has listed; its watches open a moment later.
        grace = WATCH_GRACE_DECLARED if fault in conv.faces else WATCH_GRACE
        try:
            lab.wait_until(lambda: proxy.open_watches() > 0, timeout=grace, interval=0.05)
        except WaitTimeout:
            if not proxy.counts["watches"]:
                raise NotApplicable("it keeps no watch open") from None
            lab.wait_until(lambda: proxy.open_watches() > 0, timeout=30, interval=0.05,
                           message="the controller's watches did not open again")
    if fault == "crash mid-reconcile":
        if proc.pid is None:
            raise UsageError(f"{proc.name} is not running.", "See its log: lab.logs(name).")
        proxy.kill_on_write(proc.pid)
        lab.apply(conv.apply)
        lab.wait_until(lambda: proxy.killed or _holds(lab, conv), timeout=60, interval=0.5,
                       message="the controller neither wrote anything nor converged")
        if not proxy.killed:
            raise NotApplicable("it converged without a write of its own: there was nothing to crash between")
        lab.wait_until(lambda: not proc.alive, timeout=30, message="the killed controller did not exit")
        start()
    elif fault == "API server restart":
        lab.provider.restart_component(lab.cluster, "kube-apiserver")
        lab.wait_until(lab.api_ready, timeout=120, interval=0.5, message="kube-apiserver did not come back")
        lab.apply(conv.apply)
    elif fault in ("watch broken off", "watch ended cleanly"):
        proxy.cut_watches(cleanly=fault == "watch ended cleanly")
        lab.apply(conv.apply)
    elif fault == "410 Gone":
        proxy.expire_watches()
        lab.apply(conv.apply)
    elif fault == "events 2 s late":
        proxy.event_delay = 2.0
        lab.apply(conv.apply)
    else:
        lab.apply(conv.apply)


def _holds(lab: Lab, conv: Convergence) -> bool:
    """Whether every ``until`` holds right now."""
    try:
        for wait in conv.until:
            lab.kubectl("wait", *wait.resource.split(), f"--for={wait.condition}", "--timeout=0s",
                        *(["-n", wait.namespace] if wait.namespace else []), timeout=15)
    except KrmcourseError:
        return False
    return True


def _rival(lab: Lab, conv: Convergence) -> None:
    rival = conv.rival or {}
    where = ["-n", rival["namespace"]] if rival.get("namespace") else []
    sub = [f"--subresource={rival['subresource']}"] if rival.get("subresource") else []
    lab.kubectl("patch", rival["resource"], *where, *sub, "--type=merge", "--field-manager=rival",
                "-p", json.dumps(rival["patch"]))


def _converged(lab: Lab, conv: Convergence, deadline: float) -> None:
    for wait in conv.until:
        left = deadline - time.monotonic()
        if left <= 0:
            raise WaitTimeout(f"{wait.resource} did not reach {wait.condition} in time",
                              "The controller did not converge after the fault: see its log (lab.logs).")
        try:
            lab.wait_for(wait.resource, wait.condition, namespace=wait.namespace, timeout=left)
        except KubectlError as failed:
            raise WaitTimeout(f"{wait.resource} did not reach {wait.condition}: {failed.message}",
                              "The controller did not converge after the fault: see its log (lab.logs).") from failed
