"""Exercise: find which loop fails for the invoices QueueWorker and repair what it reads.

The check reads the QueueWorker's conditions as the running operator wrote them: both loops must
report True for the current generation, and the invoices-worker Deployment must have the size
that the queue asks for. The queue must still be invoices' own, ``invoices-queue``: pointing the
QueueWorker at another workload's queue makes the governor happy on a signal that is not its backlog.
And its length must be the backlog: the queue lists the invoices waiting in it (``data.items``), and how
many differs per lab cluster (never 14, the number the page once gave).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable

from krmcourse import CheckFailed, Lab

NAMESPACE = "separate"
QUEUE = "invoices-queue"  # the ConfigMap that holds invoices' own backlog


def check(lab: Lab) -> None:
    worker = lab.get("queueworker.ops.krmcourse.dev", "invoices", namespace=NAMESPACE)
    if worker is None:
        raise CheckFailed("There is no QueueWorker invoices in the separate namespace.")
    if worker["spec"]["queue"] != QUEUE:
        raise CheckFailed(
            f"invoices now reads its backlog from {worker['spec']['queue']}, not from its own queue {QUEUE}: "
            "the governor scales it on a number that is not the invoices backlog. Repair the signal it read."
        )
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
    items = lab.support("oneloop_support").backlog(lab, NAMESPACE, QUEUE)
    if items is None:
        raise CheckFailed(f"{QUEUE} no longer lists the invoices waiting in it (data.items), so nothing says what "
                          "its length should be; 'krmcourse reset one-loop-per-pattern' makes the queue again.")
    if length != items:
        raise CheckFailed(
            f"{QUEUE} now has a length the governor can read ({length}), but it is not the backlog: the same "
            "ConfigMap lists the invoices waiting in it, and the length should count them."
        )
    spec = worker["spec"]
    want = max(1, min(spec["maxReplicas"], math.ceil(length / spec["itemsPerReplica"])))
    deployment = lab.get("deployment", "invoices-worker", namespace=NAMESPACE)
    have = None if deployment is None else deployment["spec"].get("replicas")
    if have != want:
        raise CheckFailed(f"invoices-worker has {have} replicas; a queue of {length} asks for {want}.")


def solve(lab: Lab) -> None:
    support = lab.support("oneloop_support")
    worker = lab.get("queueworker.ops.krmcourse.dev", "invoices", namespace=NAMESPACE)
    if worker is None:
        support.create_workload(lab, NAMESPACE)
    elif worker["spec"]["queue"] != QUEUE:  # pointed elsewhere by an earlier try: back to its own queue
        lab.kubectl("patch", "queueworker.ops.krmcourse.dev", "invoices", "-n", NAMESPACE, "--type=merge",
                    "-p", json.dumps({"spec": {"queue": QUEUE}}))
    # The queue lists the invoices waiting in it, one a line: its length is how many there are.
    items = support.backlog(lab, NAMESPACE, QUEUE)
    lab.kubectl("patch", "configmap", QUEUE, "-n", NAMESPACE, "--type=merge",
                "-p", json.dumps({"data": {"length": str(items)}}))
    support.ensure_separate(lab, NAMESPACE)
    lab.wait_until(
        lambda: support.condition_is(lab, NAMESPACE, "invoices", "Governed", "True"),
        timeout=30,
        message="the governor loop did not report invoices as Governed",
    )
    want = max(1, min(10, math.ceil(items / 5)))
    lab.wait_until(
        lambda: support.replicas(lab, NAMESPACE, "invoices-worker") == want,
        timeout=30,
        message=f"invoices-worker did not reach {want} replicas",
    )


def _running_operator(lab: Lab) -> None:
    """What the notebook has at this point: the workload, and the separate operator working on it."""
    support = lab.support("oneloop_support")
    if lab.get("queueworker.ops.krmcourse.dev", "invoices", namespace=NAMESPACE) is None:
        support.create_workload(lab, NAMESPACE)
    support.ensure_separate(lab, NAMESPACE)
    lab.wait_until(lambda: support.condition_is(lab, NAMESPACE, "invoices", "Composed", "True"), timeout=30,
                   message="the composite loop did not create invoices-worker")


def _length_from_the_page(lab: Lab) -> None:
    """The answer the page once gave, word for word: the queue's length set to 14."""
    _running_operator(lab)
    lab.kubectl("patch", "configmap", QUEUE, "-n", NAMESPACE, "--type=merge", "-p", '{"data": {"length": "14"}}')
    lab.wait_until(lambda: lab.support("oneloop_support").replicas(lab, NAMESPACE, "invoices-worker") == 3,
                   timeout=30, message="the governor did not size invoices-worker for a queue of 14")


def _scale_the_deployment_by_hand(lab: Lab) -> None:
    """Give invoices-worker the size its backlog asks for with kubectl scale, leaving the queue broken."""
    _running_operator(lab)
    lab.kubectl("patch", "configmap", QUEUE, "-n", NAMESPACE, "--type=merge", "-p", '{"data": {"length": "lots"}}')
    items = lab.support("oneloop_support").backlog(lab, NAMESPACE, QUEUE)
    lab.kubectl("scale", "deployment", "invoices-worker", "-n", NAMESPACE,
                f"--replicas={max(1, math.ceil(items / 5))}")


def _point_it_at_a_working_queue(lab: Lab) -> None:
    """Make the governor stop failing by pointing invoices at orders-queue, whose length is a number."""
    _running_operator(lab)
    lab.kubectl("patch", "queueworker.ops.krmcourse.dev", "invoices", "-n", NAMESPACE, "--type=merge",
                "-p", '{"spec": {"queue": "orders-queue"}}')

    def governed_again() -> bool:
        worker = lab.get("queueworker.ops.krmcourse.dev", "invoices", namespace=NAMESPACE) or {}
        governed = lab.support("oneloop_support").conditions(lab, NAMESPACE, "invoices").get("Governed", {})
        return bool(governed.get("status") == "True"
                    and governed.get("observedGeneration") == worker["metadata"]["generation"])

    lab.wait_until(governed_again, timeout=30, message="the governor never reported invoices Governed")


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "copied from the page: the queue's length set to 14": _length_from_the_page,
    "scale invoices-worker by hand": _scale_the_deployment_by_hand,
    "point invoices at the orders queue": _point_it_at_a_working_queue,
}
