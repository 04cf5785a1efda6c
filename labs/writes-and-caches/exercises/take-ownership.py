"""Exercise take-ownership: the autoscaler takes spec.size of widget shared with server-side apply (G5).

kubectl created widget shared, so kubectl's manager owns spec.size. An apply by another manager that
sets a different size is refused with 409 Conflict, naming the owner. Taking the field over is a
deliberate act: apply again with force, and managedFields record the new owner.
"""

from __future__ import annotations

from collections.abc import Callable

from krmcourse import CheckFailed, Lab
from krmcourse.apiload import SSA, RestClient

SHARED = "/apis/citizens.krmcourse.dev/v1/namespaces/citizens/widgets/shared"
MANAGER = "autoscaler"
SIZE = 5


def owners_of_size(widget: dict) -> list[tuple[str, str]]:
    return [
        (m["manager"], m["operation"])
        for m in widget["metadata"].get("managedFields", [])
        if "f:size" in m.get("fieldsV1", {}).get("f:spec", {})
    ]


def check(lab: Lab) -> None:
    rest = RestClient(lab.kubeconfig)  # kubectl get hides managedFields, so read the object directly
    try:
        answer = rest.call("GET", SHARED)
    finally:
        rest.close()
    if answer.status_code == 404:
        raise CheckFailed("Widget shared is gone; bring the lab back with lab.reset(at='take-ownership').")
    widget = answer.json()
    owners = owners_of_size(widget)
    if (MANAGER, "Apply") not in owners:
        raise CheckFailed(
            f"spec.size of widget shared is owned by {owners or 'nobody'}, not by an apply "
            f"from the field manager {MANAGER!r}."
        )
    if widget["spec"].get("size") != SIZE:
        raise CheckFailed(
            f"The {MANAGER} owns spec.size, but the size is {widget['spec'].get('size')}, not {SIZE}."
        )
    others = [owner for owner in owners if owner[0] != MANAGER]
    if others:
        raise CheckFailed(
            f"spec.size is shared with other managers {others}; the autoscaler should own it alone."
        )


def solve(lab: Lab) -> None:
    body = {
        "apiVersion": "citizens.krmcourse.dev/v1",
        "kind": "Widget",
        "metadata": {"name": "shared", "namespace": "citizens"},
        "spec": {"size": SIZE},
    }
    rest = RestClient(lab.kubeconfig)
    try:
        rest.ok("PATCH", SHARED, body, content_type=SSA, params={"fieldManager": MANAGER, "force": "true"})
    finally:
        rest.close()


def _patch_as_the_autoscaler(lab: Lab) -> None:
    """Set the size with an ordinary patch under the autoscaler's name: an Update, which owns nothing on purpose."""
    lab.kubectl("patch", "widget", "shared", "-n", "citizens", "--type=merge", f"--field-manager={MANAGER}",
                "-p", f'{{"spec": {{"size": {SIZE}}}}}')


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "an ordinary patch with the autoscaler's field manager": _patch_as_the_autoscaler,
}
