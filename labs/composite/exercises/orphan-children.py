"""Exercise: retire the WebApp ``legacy``, but keep what another team has taken up of what it made.

The exercise's first cell (``composite_support.hand_over_legacy``) has another team start using some of
legacy's children, drawn per lab cluster: its Service (through an Ingress), its ConfigMap (mounted by a
Deployment of that team), or both; never its Deployment. The check wants the WebApp gone, every child that
the other team's objects refer to still there with no owner left on it, and every other child gone with its
owner. Deleting with orphan propagation keeps all three (the one command the page once led to); deleting the
default way keeps none. The learner reads what the other team's objects refer to, and then decides.
"""

from __future__ import annotations

from collections.abc import Callable

from krmcourse import CheckFailed, Lab, ManagedProcess

NAME = "legacy"
CHILDREN = (("deployment", NAME), ("service", NAME), ("configmap", f"{NAME}-config"))


def check(lab: Lab) -> None:
    sup = lab.support("composite_support")
    made = sup.handed_over(lab)
    if not made:
        raise CheckFailed("The other team has not taken anything of legacy's up yet: the exercise's first cell "
                          "has not run since the lab started.")
    if sup.other_team_objects(lab) < made:
        raise CheckFailed("An object of the other team (label team=reporting) is gone: the point is to keep what "
                          "they use, not to remove their use. 'krmcourse reset composite --at orphan-children' "
                          "puts the lab back.")
    if sup.webapp(lab, NAME) is not None:
        raise CheckFailed(f"The WebApp {NAME} still exists in the {sup.TEAM} namespace.")
    used = sup.legacy_users(lab)
    for kind, child in CHILDREN:
        obj = lab.get(kind, child, namespace=sup.TEAM)
        if kind in used:
            if obj is None:
                raise CheckFailed(
                    f"The {kind} {child} is gone, and the other team still uses it. It went with its owner: the "
                    "garbage collector in kube-controller-manager deletes whatever an ownerReference ties to a "
                    f"deleted owner, whether or not the WebApp controller runs. Recreate the WebApp {NAME}, let "
                    "the controller rebuild it, and delete the WebApp another way.")
            if obj["metadata"].get("ownerReferences"):
                raise CheckFailed(
                    f"The {kind} {child} still has an ownerReference; is the garbage collector "
                    "still working on it? Check again in a moment.")
        elif obj is not None:
            raise CheckFailed(
                f"The {kind} {child} outlived legacy, but nothing of the other team uses it: only what is in use "
                "should stay. Look at what the other team's objects (label team=reporting) refer to.")


def solve(lab: Lab) -> None:
    sup = lab.support("composite_support")
    sup.hand_over_legacy(lab)
    # The garbage collector orphans only the children it has seen. Children made a moment ago (when an
    # earlier try lost them, and legacy was made again) may still be unknown to it: then they go with
    # their owner, and the answer is to make legacy once more and orphan it again.
    for _ in range(3):
        _legacy_ready(lab)
        lab.kubectl("delete", "webapp", NAME, "-n", sup.TEAM, "--cascade=orphan", "--wait=true")
        lab.wait_until(lambda: all(_orphaned_or_gone(lab, kind, child) for kind, child in CHILDREN), timeout=60,
                       message="the garbage collector neither orphaned nor deleted the children")
        # What the other team's Ingress and Deployments refer to stays; the rest is nobody's now: delete it.
        used = sup.legacy_users(lab)
        for kind, child in CHILDREN:
            if kind not in used:
                lab.kubectl("delete", kind, child, "-n", sup.TEAM, "--ignore-not-found")
        if lab.solved("orphan-children"):
            return


def _orphaned_or_gone(lab: Lab, kind: str, name: str) -> bool:
    obj = lab.get(kind, name, namespace=lab.support("composite_support").TEAM)
    return obj is None or not obj["metadata"].get("ownerReferences")


def _legacy_ready(lab: Lab) -> ManagedProcess:
    """As the notebook has it: the controller running and legacy Ready (re-made if an attempt lost it)."""
    sup = lab.support("composite_support")
    sup.hand_over_legacy(lab)
    controller: ManagedProcess = sup.start_controller(lab)
    if sup.webapp(lab, NAME) is None:
        lab.apply(sup.starting_objects(NAME))
    sup.wait_ready(lab, NAME)
    return controller


def _orphan_everything(lab: Lab) -> None:
    """The one command the page once led to: delete legacy with orphan propagation, and keep all it made."""
    team = lab.support("composite_support").TEAM
    _legacy_ready(lab)
    lab.kubectl("delete", "webapp", NAME, "-n", team, "--cascade=orphan", "--wait=true")
    lab.wait_until(lambda: all(_orphaned_or_gone(lab, kind, child) for kind, child in CHILDREN), timeout=60,
                   message="the garbage collector neither orphaned nor deleted the children")


def _delete_and_wait(lab: Lab) -> None:
    """Delete legacy with the default propagation, as kubectl delete does, and watch the children go."""
    team = lab.support("composite_support").TEAM
    lab.delete("webapp", NAME, namespace=team)
    lab.wait_until(lambda: all(lab.get(k, n, namespace=team) is None for k, n in CHILDREN), timeout=120,
                   message=f"the children of {NAME} outlived it")  # a fresh garbage collector learns of WebApps late


def _delete_it_normally(lab: Lab) -> None:
    """Delete legacy the default way, while the controller runs."""
    _legacy_ready(lab)
    _delete_and_wait(lab)


def _stop_the_controller_first(lab: Lab) -> None:
    """Stop the WebApp controller, thinking it is what deletes the children, then delete legacy the default way."""
    _legacy_ready(lab).stop()
    _delete_and_wait(lab)


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "copied from the page: delete legacy with --cascade=orphan, keep everything": _orphan_everything,
    "delete the WebApp the default way": _delete_it_normally,
    "stop the controller, then delete the WebApp": _stop_the_controller_first,
}
