"""Exercise: attach the queue governor to the reports Deployment.

Attaching a governor means creating the object that refers to the target; nothing about the
target changes. The check reads the QueueScalers in shop and looks for one that points the
governor at reports, with the reports-queue signal, 10 items per replica and at most 4 replicas.
"""

from __future__ import annotations

from collections.abc import Callable

import yaml

from krmcourse import CheckFailed, Lab


def check(lab: Lab) -> None:
    scalers = lab.objects("queuescalers", "shop")
    attached = [s for s in scalers if s["spec"]["targetRef"]["name"] == "reports"]
    if not attached:
        raise CheckFailed(
            "No QueueScaler in shop targets the reports Deployment yet. The governor acts only on workloads a "
            "QueueScaler names; a size set on the Deployment by hand is one number that nothing keeps up to date."
        )
    if len(attached) > 1:
        names = ", ".join(s["metadata"]["name"] for s in attached)
        raise CheckFailed(f"Several QueueScalers ({names}) target reports: two governors would fight.")
    spec = attached[0]["spec"]
    if spec["queueRef"]["name"] != "reports-queue":
        raise CheckFailed(
            f"The QueueScaler for reports reads the queue {spec['queueRef']['name']!r}, not the backlog of reports."
        )
    if spec["itemsPerReplica"] != 10:
        raise CheckFailed(f"The QueueScaler for reports counts {spec['itemsPerReplica']} items per replica.")
    if spec["maxReplicas"] > 4:
        raise CheckFailed(f"The QueueScaler for reports allows up to {spec['maxReplicas']} replicas.")


def solve(lab: Lab) -> None:
    lab.apply(lab.path / "exercises" / "attach-reports.solution.yaml")


def _scale_reports_by_hand(lab: Lab) -> None:
    """Do the governor's sum once (25 items, 10 per replica) and set the Deployment's size to it."""
    lab.kubectl("scale", "deployment", "reports", "-n", "shop", "--replicas=3")


def _copy_the_worker_scaler(lab: Lab) -> None:
    """Copy worker's QueueScaler and change only its name and target, keeping worker's queue and numbers."""
    scaler = yaml.safe_load((lab.path / "deployer" / "orders-scaler.yaml").read_text())
    scaler["metadata"]["name"] = scaler["spec"]["targetRef"]["name"] = "reports"
    lab.apply(scaler)


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "scale the reports Deployment by hand": _scale_reports_by_hand,
    "copy the worker's QueueScaler, changing only the target": _copy_the_worker_scaler,
}
