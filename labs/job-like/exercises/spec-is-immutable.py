"""Exercise: a Backup's spec (its request) cannot change after creation.

The check asks the API server with dry-run patches on a throw-away probe Backup: changing any part of
its spec (the database, and what it simulates) must be refused, while a controller must still be able
to report the probe's progress through the status subresource.
"""

from collections.abc import Callable
from types import ModuleType

from krmcourse import CheckFailed, Lab

RULE = {
    "rule": "self == oldSelf",
    "message": "a Backup's spec is its request and cannot change; create a new Backup",
}
SCHEMA = "/spec/versions/0/schema/openAPIV3Schema"
PATH = f"{SCHEMA}/properties/spec/x-kubernetes-validations"


def _probes(lab: Lab) -> ModuleType:
    return lab.support("probes")


def check(lab: Lab) -> None:
    """Ask the API server with dry-run spec patches, then status patches, on throw-away probe Backups."""
    for field, refusal in _probes(lab).spec_refusals(lab).items():
        if refusal is None:
            raise CheckFailed(
                f"The API server accepted a change to a Backup's {field} after creation; all of the spec is "
                "the request."
            )
    refusal = _probes(lab).progress_refusal(lab)
    if refusal is not None:
        raise CheckFailed(
            "The spec is safe, but the API server now refuses a Backup's status reports as well, so no "
            f"controller could say it is Running or Complete: {refusal}. Only the request should be frozen."
        )


def solve(lab: Lab) -> None:
    crd = lab.get("crd", "backups.joblike.krmcourse.dev") or {}
    ops = [{"op": "add", "path": PATH, "value": [RULE]}]
    if "x-kubernetes-validations" in crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]:
        # A rule on the whole Backup (an earlier try) would freeze its status too: the spec's rule replaces it.
        ops.insert(0, {"op": "remove", "path": f"{SCHEMA}/x-kubernetes-validations"})
    _probes(lab).add_rules(lab, ops, lambda: lab.solved("spec-is-immutable"), "spec immutability")


def _add_rule(lab: Lab, path: str, enforced: Callable[[], bool]) -> None:
    """Put RULE at ``path`` of the Backup CRD's schema, then wait until the API server ``enforced`` it."""
    _probes(lab).add_rules(lab, [{"op": "add", "path": path, "value": [RULE]}], enforced)


def _freeze_only_the_database(lab: Lab) -> None:
    """Make spec.database immutable, and leave the rest of the request open to change."""
    database = f"{SCHEMA}/properties/spec/properties/database/x-kubernetes-validations"
    _add_rule(lab, database, lambda: _probes(lab).spec_refusals(lab)["spec.database"] is not None)


def _freeze_the_whole_object(lab: Lab) -> None:
    """Put self == oldSelf on the Backup itself: the request is frozen, and so are status and labels."""
    _add_rule(lab, f"{SCHEMA}/x-kubernetes-validations",
              lambda: _probes(lab).spec_refusals(lab)["spec.simulate"] is not None)


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "make only spec.database immutable": _freeze_only_the_database,
    "self == oldSelf on the whole Backup": _freeze_the_whole_object,
}
