"""Exercise let-a-cluster-go: the fleet controller's step that lets a member cluster go (M1).

The learner writes ``let_go(fleet, name)`` in the notebook, saves it with ``lab.save_code`` and starts
the lab's fleet controller with it. The check never imports it. It reads which step the running
controller was started with, and runs a trial copy of the controller with that same step, over two
members called east and west that are both this lab's cluster (in a namespace of their own,
fleet-trial), so that it needs no second cluster. Then it measures:

* west joins and a copy of a west source appears in east; west leaves;
* (a) this cluster's API server counts one watch on ConfigMaps fewer than while west was a member
  (``apiserver_longrunning_requests``): the watch really ended;
* (b) the copy of west's source leaves east, and a source created afterwards is not mirrored;
* (c) the controller still runs, west can join again, and mirroring from west works once more.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

from krmcourse import CheckFailed, Lab
from krmcourse.errors import KrmcourseError

TRIAL = "fleet-trial"  # the name of the check's copy of the controller, and the namespace it mirrors in


def check(lab: Lab) -> None:
    fl = lab.support("fleet_lab")
    step = fl.running_let_go(lab)
    if step is None:
        raise CheckFailed("The lab's fleet controller is not running, so there is no let-go step to try. Start "
                          "it with yours: fl.FleetRun(lab).start(lab.save_code('let-go', let_go)).")
    lab.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": TRIAL}})
    trial = fl.FleetRun(lab, name=TRIAL, namespace=TRIAL)
    try:
        _trial(lab, fl, trial, step)
    finally:
        trial.stop()
        for selector in (fl.MIRROR, fl.SOURCE):
            lab.kubectl("delete", "configmaps", "-n", TRIAL, "-l", selector, "--ignore-not-found")


def _trial(lab: Lab, fl: Any, trial: Any, step: Any) -> None:  # noqa: C901 - one measured story, in order
    tag = secrets.token_hex(2)
    probe, late = f"probe-{tag}", f"late-{tag}"
    try:
        trial.start(step)
        trial.join("east", lab.kubeconfig)
        before = fl.configmap_watches(lab)
        trial.join("west", lab.kubeconfig)
    except (KrmcourseError, RuntimeError, TimeoutError) as err:
        raise CheckFailed(f"A copy of the fleet controller with your let-go step ({step}) did not start and take "
                          f"members: {err}") from None
    try:  # the member's cache is synced once it has listed; its watch opens just after
        joined = lab.wait_until(lambda: (n := fl.configmap_watches(lab)) > before and n, timeout=15, interval=0.3)
    except KrmcourseError:
        raise CheckFailed("West joined the trial fleet, but the API server never counted a watch on ConfigMaps "
                          f"for it. The trial controller's log: lab.logs({TRIAL!r}).") from None
    fl.put_source(lab, probe, namespace=TRIAL, text="from west")
    _wait(lab, lambda: f"west-{probe}" in fl.copies(lab, TRIAL), 30,
          "West joined the trial fleet, but no copy of its source appeared in east. "
          f"The trial controller's log: lab.logs({TRIAL!r}).")
    try:
        trial.leave("west")
    except (RuntimeError, TimeoutError):
        if not trial.proc.alive:
            raise CheckFailed("When west left, the whole controller stopped: east lost its controller too. Let "
                              "go of the one member, and keep serving the others.") from None
        raise CheckFailed(f"West's kubeconfig left the membership folder, and the controller never finished "
                          f"letting it go (no 'left west:' in lab.logs({TRIAL!r})).") from None
    if not trial.proc.alive:
        raise CheckFailed("After west left, the controller was no longer running: east lost its controller too. "
                          "Let go of the one member, and keep serving the others.")
    if not _wait(lab, lambda: fl.configmap_watches(lab) < joined, 10):
        now = fl.configmap_watches(lab)
        raise CheckFailed(
            f"West left, but its API server still has the controller's watch on ConfigMaps open: {now} watches "
            f"now, {joined} while west was a member, {before} before it joined. Forgetting a member does not "
            "stop the task that keeps its cache current; until that task ends, the watch stays open."
        )
    if not _wait(lab, lambda: f"west-{probe}" not in fl.copies(lab, TRIAL), 15):
        raise CheckFailed(f"West left, but east still holds west-{probe}, the copy of a west source: the "
                          "controller still counts west as a member, so that copy still has a source.")
    fl.put_source(lab, late, namespace=TRIAL, text="after west left")
    if _wait(lab, lambda: f"west-{late}" in fl.copies(lab, TRIAL), 3):
        raise CheckFailed(f"West left, yet a source created in west afterwards was mirrored into east as "
                          f"west-{late}: the controller still acts on west's objects.")
    try:
        trial.join("west", lab.kubeconfig)
    except (RuntimeError, TimeoutError):
        raise CheckFailed("West could not join the fleet again after it left: its name must be free for a new "
                          f"member. The trial controller's log says why: lab.logs({TRIAL!r}).") from None
    if not _wait(lab, lambda: {f"west-{probe}", f"west-{late}"} <= set(fl.copies(lab, TRIAL)), 30):
        raise CheckFailed("West joined again, but its sources were not mirrored into east: something of the "
                          f"old member is still in the way. The trial controller's log: lab.logs({TRIAL!r}).")


def _wait(lab: Lab, done: Callable[[], bool], timeout: float, hint: str | None = None) -> bool:
    """Poll ``done`` until it holds (True) or ``timeout`` runs out (False, or CheckFailed with ``hint``)."""
    try:
        lab.wait_until(done, timeout=timeout, interval=0.3)
    except KrmcourseError:
        if hint is not None:
            raise CheckFailed(hint) from None
        return False
    return True


def solve(lab: Lab) -> None:
    async def let_go(fleet, name):
        import asyncio

        member = fleet.members.pop(name)  # no longer a member: nothing reconciles for it
        member.task.cancel()  # stop the task that keeps its cache current: its watch ends...
        await asyncio.gather(member.task, return_exceptions=True)  # ...once the task has really stopped
        await member.close()  # close its client, so no connection to west stays open
        member.cache.store.clear()  # drop its cache
        fleet.queue.forget(lambda key: key.startswith(f"{name}|"))  # and the keys still queued for it

    fl = lab.support("fleet_lab")
    fl.FleetRun(lab).start(lab.save_code("let-go", let_go))


def _run(lab: Lab, let_go: Callable[..., Any]) -> None:
    lab.support("fleet_lab").FleetRun(lab).start(lab.save_code("let-go", let_go))


def _forget_the_member_only(lab: Lab) -> None:
    """The notebook's starting step: the member is forgotten, and its watch keeps running."""

    async def let_go(fleet, name):
        fleet.members.pop(name)

    _run(lab, let_go)


def _stop_the_watch_but_keep_the_member(lab: Lab) -> None:
    """The watch ends, but the cluster stays a member, with a cache that no longer changes."""

    async def let_go(fleet, name):
        import asyncio

        member = fleet.members[name]
        member.task.cancel()
        await asyncio.gather(member.task, return_exceptions=True)

    _run(lab, let_go)


def _stop_the_whole_controller(lab: Lab) -> None:
    """Every watch ends when the process does; so does the service to every other member."""

    def let_go(fleet, name):
        import os

        os._exit(0)

    _run(lab, let_go)


def _let_nothing_go(lab: Lab) -> None:
    def let_go(fleet, name):
        pass

    _run(lab, let_go)


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "forget the member, leave its watch running": _forget_the_member_only,
    "stop the watch, but keep the member": _stop_the_watch_but_keep_the_member,
    "stop the whole controller": _stop_the_whole_controller,
    "let nothing go": _let_nothing_go,
}
