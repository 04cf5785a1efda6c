"""Exercise add-a-predicate: give the lab's widget-controller a predicate (G4).

The check never calls the learner's function. It measures what the running controller does: a writer
of its own makes a storm of status-only writes to the storm widgets, one at a time, and the
controller's own metrics must show at most a quarter as many reconciles as writes. Then it changes a
widget's spec, and the controller must reconcile that (status.observedGeneration and the ConfigMap
catch up), so a predicate that drops every update fails too.
"""

from __future__ import annotations

from collections.abc import Callable

from krmcourse import CheckFailed, Lab
from krmcourse.apiload import RestClient
from krmcourse.errors import KrmcourseError

CONTROLLER = "widget-controller"


def _support(lab: Lab):  # noqa: ANN202 - the lab's own module
    return lab.support("good_citizens")


def check(lab: Lab) -> None:
    gc = _support(lab)
    url = gc.controller_url(lab)
    if url is None:
        raise CheckFailed(f"The lab's {CONTROLLER} is not running, so nothing reconciles widgets storm-*.",
                          "Run the exercise's cell: it saves your predicate and starts the controller with it.")
    rest = RestClient(lab.kubeconfig)
    try:
        if not _converged(lab, gc, rest):
            raise CheckFailed(
                f"The {CONTROLLER} has not caught up with widgets storm-*: a ConfigMap or a "
                "status.observedGeneration still lags a spec change. Read lab.logs('widget-controller')."
            )
        try:
            storm = gc.status_storm(lab, rest, url)
        except KrmcourseError as err:
            raise CheckFailed(f"During a storm of status writes to widgets storm-*: {err}. Is the "
                              f"{CONTROLLER} still running and watching them?") from None
        if storm["reconciles"] > storm["status writes"] // 4:
            raised = (f" Its predicate raised {storm['predicate errors']} times, and an update whose "
                      "predicate raises goes through; lab.logs('widget-controller') shows the error."
                      if storm["predicate errors"] else "")
            raise CheckFailed(
                f"{storm['status writes']} status-only writes to widgets storm-* (none changed a spec) woke "
                f"the {CONTROLLER} {storm['reconciles']} times; its predicate dropped "
                f"{storm['dropped by predicate']} of them.{raised}"
            )
        generation = gc.bump_spec(rest)
        if not _converged(lab, gc, rest):
            raise CheckFailed(
                f"The spec of widget {gc.STORM_WIDGETS[0]} changed (generation {generation}), and the "
                f"{CONTROLLER} never reconciled it: its ConfigMap and status.observedGeneration still lag. "
                "The predicate dropped a change the controller must act on."
            )
    finally:
        rest.close()


def _converged(lab: Lab, gc, rest: RestClient) -> bool:  # noqa: ANN001
    try:
        lab.wait_until(lambda: gc.children_match(rest, gc.STORM_RUN), timeout=20,
                       message="the storm widgets did not converge")
    except KrmcourseError:
        return False
    return True


def solve(lab: Lab) -> None:
    def wakes(old: dict, new: dict) -> bool:
        # Status writes (and label edits) leave metadata.generation alone; only spec changes move it.
        return old["metadata"]["generation"] != new["metadata"]["generation"]

    path = lab.save_code("predicate", wakes)
    lab.start(CONTROLLER, "--predicate", str(path))


def _start_without_a_predicate(lab: Lab) -> None:
    lab.start(CONTROLLER)


def _drop_every_update(lab: Lab) -> None:
    def wakes(old: dict, new: dict) -> bool:
        return False

    lab.start(CONTROLLER, "--predicate", str(lab.save_code("predicate", wakes)))


def _compare_resource_versions(lab: Lab) -> None:
    """Every write gets a new resourceVersion, so this lets every update through."""

    def wakes(old: dict, new: dict) -> bool:
        return old["metadata"]["resourceVersion"] != new["metadata"]["resourceVersion"]

    lab.start(CONTROLLER, "--predicate", str(lab.save_code("predicate", wakes)))


def _stop_the_controller(lab: Lab) -> None:
    lab.start(CONTROLLER)
    lab.stop(CONTROLLER)


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "start the controller without a predicate": _start_without_a_predicate,
    "a predicate that drops every update": _drop_every_update,
    "compare resourceVersions instead of generations": _compare_resource_versions,
    "stop the controller, so nothing reconciles": _stop_the_controller,
}
