"""Exercise: attach the queue governor to the reports Deployment.

Attaching a governor means creating the object that refers to the target; nothing about the
target changes. The check reads the QueueScalers in shop and looks for one that points the
governor at reports, with the reports-queue signal, 10 items per replica and at most 4 replicas.
"""

from __future__ import annotations

import json

from krmcourse import CheckFailed, Lab


def check(lab: Lab) -> None:
    scalers = json.loads(lab.kubectl("get", "queuescalers", "-n", "shop", "-o", "json"))["items"]
    attached = [s for s in scalers if s["spec"]["targetRef"]["name"] == "reports"]
    if not attached:
        raise CheckFailed("No QueueScaler in shop targets the reports Deployment yet.")
    if len(attached) > 1:
        names = ", ".join(s["metadata"]["name"] for s in attached)
        raise CheckFailed(f"Several QueueScalers ({names}) target reports: two governors would fight.")
    spec = attached[0]["spec"]
    if spec["queueRef"]["name"] != "reports-queue":
        raise CheckFailed(f"The QueueScaler for reports reads the queue {spec['queueRef']['name']!r}.")
    if spec["itemsPerReplica"] != 10:
        raise CheckFailed(f"The QueueScaler for reports counts {spec['itemsPerReplica']} items per replica.")
    if spec["maxReplicas"] > 4:
        raise CheckFailed(f"The QueueScaler for reports allows up to {spec['maxReplicas']} replicas.")


def solve(lab: Lab) -> None:
    lab.apply(lab.path / "exercises" / "attach-reports.solution.yaml")
