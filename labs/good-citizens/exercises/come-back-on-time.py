"""Exercise come-back-on-time: the lab's expiry-controller expires widgets on time with RequeueAfter (G3).

The controller runs with a ten-minute resync and watches the ConfigMaps it owns, so nothing but a
RequeueAfter brings it back to a widget whose only change is the clock. The check never calls the
learner's function. It adds a widget that expires after a few seconds and measures what the running
controller does: the widget must be marked Expired within a few seconds of its time (more on a
machine that was slow to reconcile the widget when it was made: see ``expiry_trial``), and, while
nothing but the clock moves, the controller's own metrics must show only a handful of reconciles.
A short resync, or a requeue for every widget every second, expires the widget too, and fails on
the second count.
"""

from __future__ import annotations

from collections.abc import Callable

from krmcourse import CheckFailed, Lab
from krmcourse.apiload import RestClient
from krmcourse.errors import KrmcourseError

CONTROLLER = "expiry-controller"
#: Reconciles allowed while only the clock moves: the expiring widget's requeue, the echo of its
#: status write, and a little slack. A requeue every second for every widget makes several times more.
MOST_RECONCILES = 6


def check(lab: Lab) -> None:
    gc = lab.support("good_citizens")
    url = gc.controller_url(lab, CONTROLLER)
    if url is None:
        raise CheckFailed(f"The lab's {CONTROLLER} is not running, so nothing reconciles the expiry widgets.",
                          "Run the exercise's cell: it saves your requeue_after and starts the controller with it.")
    rest = RestClient(lab.kubeconfig)
    try:
        trial = gc.expiry_trial(lab, rest, url)
    except KrmcourseError as err:
        raise CheckFailed(f"The {CONTROLLER} did not take in a new expiry widget: {err}. Is it still running? "
                          f"lab.logs({CONTROLLER!r}) shows what it did.") from None
    finally:
        rest.close()
    if trial["marked Expired after s"] is None:
        raise CheckFailed(
            f"Widget {trial['widget']} was due to expire {trial['expires after s']} s after it was made, and "
            f"{trial['grace s']:.0f} s past that time it was still not marked Expired, though the controller had "
            f"reconciled it {trial['reconciled when made after s']} s after it was made. "
            "Nothing about it changed but the clock, so no event came, and the next resync is ten minutes "
            "away: what brings the controller back to it at the right moment?"
        )
    if trial["reconciles"] > MOST_RECONCILES:
        raise CheckFailed(
            f"The widget expired on time, but while nothing changed but the clock the {CONTROLLER} ran "
            f"{trial['reconciles']} reconciles in {trial['seconds measured']} s for {trial['widgets']} "
            f"widgets (at most {MOST_RECONCILES} are needed). Only widgets whose state depends on time "
            "need to come back, and only when that time comes."
        )


def solve(lab: Lab) -> None:
    def requeue_after(widget: dict) -> float | None:
        from datetime import UTC, datetime

        ttl = widget["spec"].get("expireAfterSeconds")
        if ttl is None:
            return None  # nothing about this widget depends on time: events are enough
        made = datetime.fromisoformat(widget["metadata"]["creationTimestamp"])
        left = ttl - (datetime.now(UTC) - made).total_seconds()
        return left + 0.1 if left > 0 else None  # just after it expires; once expired, never again

    _start(lab, requeue_after)


def _start(lab: Lab, fn: Callable[[dict], float | None], *extra: str) -> None:
    path = lab.save_code("requeue-after", fn)
    lab.start(CONTROLLER, "--selector", "citizens.krmcourse.dev/run=expiry", "--resync", "600",
              "--watch-children", *extra, "--requeue-after", str(path))


def _never_requeue(lab: Lab) -> None:
    def requeue_after(widget: dict) -> float | None:
        return None

    _start(lab, requeue_after)


def _every_second(lab: Lab) -> None:
    def requeue_after(widget: dict) -> float | None:
        return 1.0

    _start(lab, requeue_after)


def _come_back_late(lab: Lab) -> None:
    """Back to the expiring widget only, but half a minute after its time: not on time on any machine
    that reconciled the widget promptly when it was made."""
    def requeue_after(widget: dict) -> float | None:
        from datetime import UTC, datetime

        ttl = widget["spec"].get("expireAfterSeconds")
        if ttl is None:
            return None
        made = datetime.fromisoformat(widget["metadata"]["creationTimestamp"])
        left = ttl - (datetime.now(UTC) - made).total_seconds()
        return left + 30 if left > 0 else None

    _start(lab, requeue_after)


def _short_resync(lab: Lab) -> None:
    """The disguise notebook 32 measures: a one-second resync, and no RequeueAfter at all."""
    lab.start(CONTROLLER, "--selector", "citizens.krmcourse.dev/run=expiry", "--resync", "1", "--watch-children")


def _stop_the_controller(lab: Lab) -> None:
    lab.start(CONTROLLER)
    lab.stop(CONTROLLER)


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "leave requeue_after returning None": _never_requeue,
    "requeue every widget every second": _every_second,
    "come back to the expiring widget half a minute late": _come_back_late,
    "a one-second resync instead of RequeueAfter": _short_resync,
    "stop the controller, so nothing reconciles": _stop_the_controller,
}
