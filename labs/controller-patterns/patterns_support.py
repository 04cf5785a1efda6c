"""Plumbing for the controller-patterns lab: follow owners, try requests, read what controllers wrote.

Every function asks the lab's API server; nothing here knows an answer in advance.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from krmcourse import KubectlError, Lab
from krmcourse.quiz import Question

NAMESPACE = "demo"

# The four example objects of the lab, as quiz questions: the answer comes from walking the tree.
EXAMPLES: tuple[Question, ...] = (
    Question(
        "deployment.web",
        "Deployment web, looked after by the Deployment controller.",
        True,
        why="It makes a ReplicaSet (which makes Pods), all owned through ownerReferences.",
        example="Deployment, StatefulSet",
    ),
    Question(
        "hpa.web",
        "HorizontalPodAutoscaler web, looked after by the HPA controller.",
        False,
        why="It changes the replicas of a Deployment it did not create and does not own.",
        example="HPA, VPA, KEDA",
    ),
    Question(
        "policy.replica-limit",
        "ValidatingAdmissionPolicy replica-limit, run by the API server.",
        False,
        on_requests=True,
        why="It judges each create and update request, and creates nothing.",
        example="Pod Security admission, Gatekeeper, Kyverno",
    ),
    Question(
        "service.web-public",
        "Service web-public of type LoadBalancer, served by a cloud controller.",
        True,
        outside_krm=True,
        why="A cloud's service controller would build a load balancer outside "
        "the cluster and write its address into status.",
        example="cloud-controller-manager",
    ),
)


@dataclass
class Attempt:
    """What the API server answered to a write."""

    allowed: bool
    message: str


def controller_of(obj: dict[str, Any]) -> dict[str, Any] | None:
    return next((r for r in obj["metadata"].get("ownerReferences") or [] if r.get("controller")), None)


def owner_chain(lab: Lab, kind: str, name: str, namespace: str = NAMESPACE) -> list[str]:
    """Kind/name from an object up through its controller ownerReferences, as the API server has them."""
    chain = [f"{kind}/{name}"]
    obj = lab.get(kind, name, namespace=namespace)
    while obj is not None and (ref := controller_of(obj)) is not None:
        chain.append(f"{ref['kind']}/{ref['name']}")
        obj = lab.get(ref["kind"].lower(), ref["name"], namespace=namespace)
    return chain


def pods(lab: Lab, selector: str = "app=web", namespace: str = NAMESPACE) -> list[dict[str, Any]]:
    return json.loads(lab.kubectl("get", "pods", "-n", namespace, "-l", selector, "-o", "json"))["items"]


def current_replicaset(lab: Lab, deployment: str = "web", namespace: str = NAMESPACE) -> str:
    """The ReplicaSet that Deployment ``deployment`` controls and runs pods with right now."""
    items = json.loads(lab.kubectl("get", "replicasets", "-n", namespace, "-o", "json"))["items"]
    mine = [
        rs
        for rs in items
        if (controller_of(rs) or {}).get("name") == deployment
        and (controller_of(rs) or {}).get("kind") == "Deployment"
    ]
    live = [rs for rs in mine if rs["spec"].get("replicas")]
    if not live:
        raise LookupError(f"Deployment {deployment} controls no ReplicaSet with pods yet")
    return live[0]["metadata"]["name"]


def try_scale(lab: Lab, replicas: int, deployment: str = "web", namespace: str = NAMESPACE) -> Attempt:
    """Ask for a replica count through the scale subresource, as `kubectl scale` and the HPA do."""
    try:
        lab.kubectl("scale", f"deployment/{deployment}", "-n", namespace, f"--replicas={replicas}")
    except KubectlError as exc:
        return Attempt(False, exc.stderr.strip())
    return Attempt(True, "")


def wait_policy_in_force(lab: Lab, deployment: str = "web", namespace: str = NAMESPACE, timeout: float = 30) -> str:
    """Dry-run a scale past the limit until the API server refuses it, and return its message.

    The API server loads a new admission policy and its binding through its own watch, so for a moment
    after they are created, requests still pass. A server-side dry run goes through admission and
    changes nothing.
    """

    def refused() -> str | None:
        try:
            lab.kubectl("scale", f"deployment/{deployment}", "-n", namespace, "--replicas=6", "--dry-run=server")
        except KubectlError as exc:
            return exc.stderr.strip()
        return None

    return lab.wait_until(refused, timeout=timeout, message="the replica-limit policy never took effect")


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind), {})
