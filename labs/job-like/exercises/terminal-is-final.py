"""Exercise: the API server itself refuses to undo a Backup's Complete or Failed condition."""

import json
from types import ModuleType

from krmcourse import CheckFailed, Lab

# For every terminal condition that was True: it is still True, and no other terminal condition is.
RULE = {
    "rule": "!has(oldSelf.conditions) || oldSelf.conditions.all(o, "
    "!(o.type in ['Complete', 'Failed'] && o.status == 'True') || (has(self.conditions) "
    "&& self.conditions.exists(n, n.type == o.type && n.status == 'True') "
    "&& self.conditions.all(n, n.type == o.type || !(n.type in ['Complete', 'Failed'] && n.status == 'True'))))",
    "message": "a Backup that is Complete or Failed is final",
}
PATH = "/spec/versions/0/schema/openAPIV3Schema/properties/status/x-kubernetes-validations"


def _probes(lab: Lab) -> ModuleType:
    return lab.support("probes")


def check(lab: Lab) -> None:
    """Ask the API server with a dry-run status patch on throw-away probe Backups."""
    for move, refusal in _probes(lab).terminal_refusals(lab).items():
        if refusal is None:
            raise CheckFailed(
                f"The API server accepted a status change ({move}): a terminal condition can still be undone. "
                "Compare the old and new status.conditions in a rule on the status schema."
            )


def solve(lab: Lab) -> None:
    lab.kubectl(
        "patch",
        "crd",
        "backups.joblike.krmcourse.dev",
        "--type=json",
        "-p",
        json.dumps([{"op": "add", "path": PATH, "value": [RULE]}]),
    )
    # The API server switches to the new schema asynchronously; wait until it enforces the rule.
    lab.wait_until(
        lambda: all(_probes(lab).terminal_refusals(lab).values()),
        timeout=30,
        interval=0.5,
        message="the API server did not start enforcing the transition rule",
    )
