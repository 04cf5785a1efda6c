"""Exercise: find which loop fails for the invoices QueueWorker and repair what it reads.

The check reads the QueueWorker's conditions as the running operator wrote them: both loops must
report True for the current generation, and the invoices-worker Deployment must have the size
that the queue asks for.
"""

from __future__ import annotations

import math

from krmcourse import CheckFailed, Lab

NAMESPACE = "separate"


def check(lab: Lab) -> None:
    worker = lab.get("queueworker.ops.krmcourse.dev", "invoices", namespace=NAMESPACE)
    if worker is None:
        raise CheckFailed("There is no QueueWorker invoices in the separate namespace.")
    conditions = {c["type"]: c for c in (worker.get("status") or {}).get("conditions", [])}
    for kind in ("Composed", "Governed"):
        cond = conditions.get(kind)
        if cond is None:
            raise CheckFailed(f"QueueWorker invoices has no {kind} condition: is the operator running?")
        if cond["status"] != "True":
            raise CheckFailed(
                f"QueueWorker invoices reports {kind}={cond['status']}: {cond.get('message', '')}"
            )
        if cond.get("observedGeneration") != worker["metadata"]["generation"]:
            raise CheckFailed(f"The {kind} condition of invoices is about an older generation.")
    queue = lab.get("configmap", worker["spec"]["queue"], namespace=NAMESPACE) or {}
    raw = (queue.get("data") or {}).get("length", "0")
    try:
        length = int(raw)
    except ValueError:
        raise CheckFailed(f"The queue ConfigMap of invoices has length {raw!r}.") from None
    spec = worker["spec"]
    want = max(1, min(spec["maxReplicas"], math.ceil(length / spec["itemsPerReplica"])))
    deployment = lab.get("deployment", "invoices-worker", namespace=NAMESPACE)
    have = None if deployment is None else deployment["spec"].get("replicas")
    if have != want:
        raise CheckFailed(f"invoices-worker has {have} replicas; a queue of {length} asks for {want}.")


def solve(lab: Lab) -> None:
    support = lab.support("oneloop_support")
    if lab.get("queueworker.ops.krmcourse.dev", "invoices", namespace=NAMESPACE) is None:
        support.create_workload(lab, NAMESPACE)
    lab.kubectl(
        "patch",
        "configmap",
        "invoices-queue",
        "-n",
        NAMESPACE,
        "--type=merge",
        "-p",
        '{"data": {"length": "14"}}',
    )
    support.ensure_separate(lab, NAMESPACE)
    lab.wait_until(
        lambda: support.condition_is(lab, NAMESPACE, "invoices", "Governed", "True"),
        timeout=30,
        message="the governor loop did not report invoices as Governed",
    )
    lab.wait_until(
        lambda: support.replicas(lab, NAMESPACE, "invoices-worker") == 3,
        timeout=30,
        message="invoices-worker did not reach 3 replicas",
    )
