"""Exercise: turn on the sidecar enforcer for the billing namespace.

The billing namespace already opted in to the webhook (its namespace label), but it has no
SidecarPolicy, so the enforcer has nothing to enforce there. The check sends dry-run pod creates
through the running webhook: a pod with a ``team`` label must come back with the log-shipper
sidecar, and a pod without one must be refused by the webhook.
"""

from __future__ import annotations

from collections.abc import Callable

import yaml

from krmcourse import CheckFailed, Lab

IMAGE = "registry.example/log-shipper:2.1"


def check(lab: Lab) -> None:
    enf = lab.support("enforcer_support")
    policies = lab.objects("sidecarpolicies", "billing")
    if not policies:
        raise CheckFailed("There is no SidecarPolicy in the billing namespace yet.")
    if not enf.answering(lab):
        raise CheckFailed(
            "The sidecar enforcer webhook is not running, so nothing reads the policy: run the notebook "
            "cell that starts it."
        )
    labelled = enf.create(lab, enf.pod("sidecar-probe", "billing", team="billing"))
    if not labelled.allowed:
        raise CheckFailed(f"A pod labelled team=billing is refused in billing: {labelled.message}")
    if f"log-shipper={IMAGE}" not in labelled.containers:
        raise CheckFailed(
            f"A new pod in billing gets the containers {labelled.containers}, without a log-shipper "
            f"container running {IMAGE}."
        )
    unlabelled = enf.create(lab, enf.pod("sidecar-probe", "billing"))
    if unlabelled.allowed:
        raise CheckFailed("A pod without a team label is still admitted in the billing namespace.")
    if "team" not in unlabelled.message:
        raise CheckFailed(
            f"A pod without a team label is refused, but for another reason: {unlabelled.message}"
        )


def solve(lab: Lab) -> None:
    lab.support("enforcer_support").ensure_running(lab)
    lab.apply(lab.path / "exercises" / "sidecar-policy.solution.yaml")


def _policy_like_payments(lab: Lab, **spec: object) -> None:
    """Start the webhook if needed, and give billing a copy of the payments SidecarPolicy with ``spec`` changed."""
    enf = lab.support("enforcer_support")
    enf.ensure_running(lab)
    policy = yaml.safe_load((lab.path / "policies" / "payments-sidecars.yaml").read_text())
    policy["metadata"]["namespace"] = "billing"
    policy["spec"] |= spec
    lab.apply(policy)


def _copy_the_payments_policy(lab: Lab) -> None:
    """Copy the payments policy as it is, with the log shipper version payments runs."""
    _policy_like_payments(lab)


def _sidecar_without_required_labels(lab: Lab) -> None:
    """Fix the image but leave out requiredLabels: the sidecar comes, unlabelled pods still get in."""
    _policy_like_payments(lab, sidecar={"name": "log-shipper", "image": IMAGE}, requiredLabels=None)


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "copy the payments policy unchanged": _copy_the_payments_policy,
    "the right sidecar, but no required labels": _sidecar_without_required_labels,
}
