"""Exercise: pg-billing must survive the deletion of the claim that uses it."""

from __future__ import annotations

import json
from collections.abc import Callable

from krmcourse import CheckFailed, Lab

DATABASES = "databases.claims.krmcourse.dev"
BINDER_FINALIZER = "claims.krmcourse.dev/database-protection"


def check(lab: Lab) -> None:
    db = lab.get(DATABASES, "pg-billing")
    if db is None:
        raise CheckFailed("Database pg-billing is gone, and its data with it; reset the lab and try again.")
    policy = db["spec"].get("reclaimPolicy")
    if policy != "Retain":
        held = [f for f in db["metadata"].get("finalizers", []) if f != BINDER_FINALIZER]
        raise CheckFailed(
            f"pg-billing has reclaimPolicy {policy}: the binder deletes it when its claim goes."
            + (f" The finalizer {', '.join(held)} would only hold it half-deleted (Terminating) after that, "
               "where no claim can ever bind it again." if held else "")
        )


def solve(lab: Lab) -> None:
    lab.kubectl("patch", DATABASES, "pg-billing", "--type=merge", "-p", '{"spec": {"reclaimPolicy": "Retain"}}')


def _use_the_pv_field_name(lab: Lab) -> None:
    """Set PersistentVolume's persistentVolumeReclaimPolicy: the server drops the unknown field with a warning."""
    lab.kubectl("patch", DATABASES, "pg-billing", "--type=merge",
                "-p", '{"spec": {"persistentVolumeReclaimPolicy": "Retain"}}')


def _hold_it_with_a_finalizer(lab: Lab) -> None:
    """Add a finalizer of one's own, as the protection finalizer holds a bound Database."""
    db = lab.get(DATABASES, "pg-billing")
    assert db is not None
    finalizers = [*db["metadata"].get("finalizers", []), "billing.krmcourse.dev/keep-data"]
    lab.kubectl("patch", DATABASES, "pg-billing", "--type=merge",
                "-p", json.dumps({"metadata": {"finalizers": finalizers}}))


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "the PersistentVolume field name": _use_the_pv_field_name,
    "a finalizer of one's own to keep it": _hold_it_with_a_finalizer,
}
