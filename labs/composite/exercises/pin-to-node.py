"""Exercise: run the WebApp ``shop``'s pods on the lab's second simulated node only.

The WebApp offers a few chosen override fields instead of a whole pod template. The check wants the
choice declared on the WebApp (where its owners look), a nodeSelector that the labels of the real nodes
match on that node alone, and every pod of the Deployment scheduled on that node by the real scheduler.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from krmcourse import CheckFailed, Lab

NAME = "shop"


def target(lab: Lab) -> str:
    """The second simulated node, found by label as on every provider (``lab.nodes()``)."""
    return lab.nodes()[1]


def matching_nodes(lab: Lab, selector: dict[str, str]) -> list[str]:
    """The simulated nodes whose labels match ``selector``, read from the Node objects."""
    nodes = [lab.get("node", name) or {} for name in lab.nodes()]
    return [n["metadata"]["name"] for n in nodes
            if all((n["metadata"].get("labels") or {}).get(k) == v for k, v in selector.items())]


def check(lab: Lab) -> None:
    sup = lab.support("composite_support")
    app = sup.webapp(lab, NAME)
    if app is None:
        raise CheckFailed(f"The WebApp {NAME} is missing from the {sup.TEAM} namespace.")
    node = target(lab)
    pods = [p for p in sup.pods_of(lab, NAME) if not p["metadata"].get("deletionTimestamp")]
    where = sorted({p["spec"].get("nodeName") or "(not scheduled)" for p in pods})
    selector = app["spec"].get("nodeSelector") or {}
    if not selector:
        raise CheckFailed(
            f"The WebApp {NAME} does not say where its pods may run; its pods are on {where}."
            + (" Whatever put them there is not in the WebApp, where its owners look and the controller "
               "reads." if where == [node] else "")
        )
    matched = matching_nodes(lab, selector)
    if matched != [node]:
        raise CheckFailed(
            f"The WebApp's nodeSelector {selector} matches the nodes {matched or 'none'}, not {node} alone."
        )
    if where != [node]:
        raise CheckFailed(
            f"The pods of {NAME} are on {where}, not only on {node} (a rollout may still be "
            "going on; check again in a moment)."
        )
    if len(pods) != app["spec"]["replicas"]:
        raise CheckFailed(
            f"{len(pods)} pods of {NAME} exist, but the WebApp asks for {app['spec']['replicas']}."
        )


def solve(lab: Lab) -> None:
    sup = lab.support("composite_support")
    sup.start_controller(lab)
    lab.kubectl(
        "patch",
        "webapp",
        NAME,
        "-n",
        sup.TEAM,
        "--type=merge",
        "-p",
        '{"spec": {"nodeSelector": {"kubernetes.io/hostname": "' + target(lab) + '"}}}',
    )
    sup.wait_ready(lab, NAME)
    lab.wait_until(lambda: _settled(lab), timeout=60, message="the pods never all moved to " + target(lab))


def _settled(lab: Lab) -> bool:
    try:
        check(lab)
    except CheckFailed:
        return False
    return True


def _patch_the_deployment(lab: Lab) -> None:
    """Put the nodeSelector into the pod template of the Deployment, the child, and watch the pods move."""
    sup = lab.support("composite_support")
    sup.start_controller(lab)
    patch = {"spec": {"template": {"spec": {"nodeSelector": {"kubernetes.io/hostname": target(lab)}}}}}
    lab.kubectl("patch", "deployment", NAME, "-n", sup.TEAM, "--type=merge", "-p", json.dumps(patch))
    lab.wait_until(lambda: {p["spec"].get("nodeName") for p in sup.pods_of(lab, NAME)} == {target(lab)},
                   timeout=60, message="the pods never moved")


def _select_the_simulated_nodes(lab: Lab) -> None:
    """Select by the label lab.nodes() uses, type=kwok, in the WebApp: every simulated node has it."""
    sup = lab.support("composite_support")
    lab.kubectl("patch", "webapp", NAME, "-n", sup.TEAM, "--type=merge",
                "-p", json.dumps({"spec": {"nodeSelector": {"type": "kwok"}}}))
    sup.wait_ready(lab, NAME)


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "a nodeSelector in the Deployment instead of the WebApp": _patch_the_deployment,
    "a nodeSelector that every simulated node matches": _select_the_simulated_nodes,
}
