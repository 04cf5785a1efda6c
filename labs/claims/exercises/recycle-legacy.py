"""Exercise: make the Released Database pg-legacy available to new claims again (recycling).

The check reads pg-legacy's spec.claimRef: the binding is what the binder acts on, while the Bound
condition is only its report of it.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from krmcourse import CheckFailed, Lab

DATABASES = "databases.claims.krmcourse.dev"


def check(lab: Lab) -> None:
    db = lab.get(DATABASES, "pg-legacy")
    if db is None:
        raise CheckFailed("pg-legacy was deleted; recycling keeps the Database and only releases it.")
    if db["metadata"].get("deletionTimestamp"):
        raise CheckFailed("pg-legacy is being deleted; recycling keeps the Database and only releases it.")
    ref = db["spec"].get("claimRef")
    if ref and ref.get("name") == "old-orders":
        said = lab.support("claimlab").bound_reason(lab, "databases", "pg-legacy")
        raise CheckFailed(
            "pg-legacy still records its old claim team-b/old-orders, so no new claim can bind it."
            + ("" if ref.get("uid") else " Without a uid, that claimRef reserves it for a claim of that "
               "name: pre-binding, not releasing.")
            + (f" Its Bound condition says {said}, but the binder writes that condition from claimRef, "
               "and will write it back." if said and said != "Released" else "")
        )


def solve(lab: Lab) -> None:
    lab.kubectl("patch", DATABASES, "pg-legacy", "--type=json", "-p", '[{"op": "remove", "path": "/spec/claimRef"}]')


def _drop_only_the_uid(lab: Lab) -> None:
    """Remove the old claim's uid from claimRef and keep its namespace and name."""
    lab.kubectl("patch", DATABASES, "pg-legacy", "--type=json",
                "-p", '[{"op": "remove", "path": "/spec/claimRef/uid"}]')


def _write_available_by_hand(lab: Lab) -> None:
    """Patch the Bound condition to say Available, leaving the binding in the spec as it was."""
    status = {"conditions": [{"type": "Bound", "status": "False", "reason": "Available",
                              "message": "recycled", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    lab.kubectl("patch", DATABASES, "pg-legacy", "--subresource=status", "--type=merge",
                "-p", json.dumps({"status": status}))


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "remove only the uid from claimRef": _drop_only_the_uid,
    "write Available into the status by hand": _write_available_by_hand,
}
