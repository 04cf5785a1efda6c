"""Exercise: publish the Server state machine in the CRD schema.

With an enum on status.state, `kubectl explain` lists the states, and the API server refuses a status
write with a state the machine does not have (a controller bug such as "Provisoned"). The check sends
status writes to a scratch Server with the server's dry-run, so nothing is stored.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from krmcourse import CheckFailed, KubectlError, Lab

STATES = ["Registering", "Inspecting", "Provisioning", "Provisioned", "Error"]
CRD = "servers.metal.krmcourse.dev"


def _status_write(lab: Lab, state: str) -> str | None:
    """None when the server would accept status.state=state, else its error message."""
    try:
        lab.kubectl(
            "patch",
            CRD,
            "enum-check",
            "-n",
            "scratch",
            "--subresource=status",
            "--type=merge",
            "--dry-run=server",
            "-p",
            json.dumps({"status": {"state": state}}),
        )
    except KubectlError as err:
        return " ".join(err.stderr.split())
    return None


def check(lab: Lab) -> None:
    """Fail unless every state of the machine is accepted and a misspelt one is refused."""
    lab.apply(
        {
            "apiVersion": "metal.krmcourse.dev/v1alpha1",
            "kind": "Server",
            "metadata": {"name": "enum-check", "namespace": "scratch"},
            "spec": {},
        }
    )
    try:
        refused = [s for s in STATES if _status_write(lab, s) is not None]
        if refused:
            raise CheckFailed(f"The schema refuses states the controller uses: {', '.join(refused)}.")
        if _status_write(lab, "Provisoned") is None:
            raise CheckFailed(
                "status.state still accepts any string, so a misspelt state is stored silently."
            )
    finally:
        lab.delete(CRD, "enum-check", namespace="scratch", wait=False)


def solve(lab: Lab) -> None:
    """Add an enum with the five states to status.state in the live CRD."""
    path = "/spec/versions/0/schema/openAPIV3Schema/properties/status/properties/state/enum"
    lab.kubectl(
        "patch",
        "customresourcedefinition",
        CRD,
        "--type=json",
        "-p",
        json.dumps([{"op": "add", "path": path, "value": STATES}]),
    )

    lab.wait_until(lambda: lab.solved("state-enum"), timeout=30, message="the new schema is not enforced yet")


def _schema_patch(lab: Lab, field: str, value: object) -> None:
    """Set one field of status.state's schema in the live CRD."""
    path = f"/spec/versions/0/schema/openAPIV3Schema/properties/status/properties/state/{field}"
    lab.kubectl("patch", "customresourcedefinition", CRD, "--type=json",
                "-p", json.dumps([{"op": "add", "path": path, "value": value}]))


def _list_the_states_in_the_description(lab: Lab) -> None:
    """Publish the states as prose: kubectl explain shows them, the API server enforces nothing."""
    _schema_patch(lab, "description", f"Where the server is in its life cycle: one of {', '.join(STATES)}.")


def _enum_without_the_error_state(lab: Lab) -> None:
    """An enum of the happy path only: the terminal Error state is forgotten."""
    _schema_patch(lab, "enum", STATES[:-1])

    def refused() -> bool:  # the API server swaps in the new schema a moment after the CRD changes
        try:
            check(lab)
        except CheckFailed as failed:
            return "refuses states" in failed.message
        return False

    lab.wait_until(refused, timeout=30, message="the enum without Error is not enforced yet")


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "list the states in the field's description": _list_the_states_in_the_description,
    "an enum without the Error state": _enum_without_the_error_state,
}
