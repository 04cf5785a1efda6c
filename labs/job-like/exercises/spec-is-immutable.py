"""Exercise: a Backup's spec (its request) cannot change after creation."""

import json
from types import ModuleType

from krmcourse import CheckFailed, Lab

RULE = {
    "rule": "self == oldSelf",
    "message": "a Backup's spec is its request and cannot change; create a new Backup",
}
PATH = "/spec/versions/0/schema/openAPIV3Schema/properties/spec/x-kubernetes-validations"


def _probes(lab: Lab) -> ModuleType:
    return lab.support("probes")


def check(lab: Lab) -> None:
    """Ask the API server with a dry-run spec patch on a throw-away probe Backup."""
    if _probes(lab).spec_refusal(lab) is None:
        raise CheckFailed("The API server accepted a change to a Backup's spec.database after creation.")


def solve(lab: Lab) -> None:
    lab.kubectl(
        "patch",
        "crd",
        "backups.joblike.krmcourse.dev",
        "--type=json",
        "-p",
        json.dumps([{"op": "add", "path": PATH, "value": [RULE]}]),
    )
    lab.wait_until(
        lambda: _probes(lab).spec_refusal(lab) is not None,
        timeout=30,
        interval=0.5,
        message="the API server did not start enforcing spec immutability",
    )
