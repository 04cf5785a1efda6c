"""Exercise: act as the MemoryStore controller and report that ``primary`` is Ready.

A controller reports through the status subresource: a ``Ready`` condition in the metav1.Condition
shape (the schema already insists on ``reason``), and the generation the report is about. The check
wants that generation to be the object's current one, so a report written before the last spec
change is stale and does not count.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from typing import Any

from krmcourse import CheckFailed, Lab


def check(lab: Lab) -> None:
    primary = lab.get("memorystores.store.krmcourse.dev", "primary", namespace=lab.support("memorystore_crd").NAMESPACE)
    if primary is None:
        raise CheckFailed(
            "The MemoryStore primary is missing from the store namespace; reset the lab to get it back."
        )
    status = primary.get("status") or {}
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    if ready is None:
        raise CheckFailed(
            "primary's status, as the API server stored it, has no condition of type Ready. With the status "
            "subresource, the API server drops a status sent to the object itself."
        )
    if ready.get("status") != "True":
        raise CheckFailed(
            f"primary's Ready condition has status {ready.get('status')!r}, so it is not ready."
        )
    generation = primary["metadata"]["generation"]
    observed = ready.get("observedGeneration", status.get("observedGeneration"))
    if observed is None:
        raise CheckFailed("primary's status does not say which generation of the spec it describes.")
    if observed != generation:
        raise CheckFailed(
            f"primary's Ready condition describes generation {observed}, but the object is at "
            f"generation {generation}: the report is stale."
        )


def solve(lab: Lab) -> None:
    c = lab.support("memorystore_crd")
    primary = lab.get("memorystores.store.krmcourse.dev", "primary", namespace=c.NAMESPACE)
    if primary is None:
        raise CheckFailed("The MemoryStore primary is missing; reset the lab first.")
    generation = primary["metadata"]["generation"]
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    status = {
        "observedGeneration": generation,
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "StoreServing",
                "observedGeneration": generation,
                "message": "All replicas answer reads.",
                "lastTransitionTime": now,
            }
        ],
    }
    lab.kubectl(
        "patch",
        "memorystores.store.krmcourse.dev",
        "primary",
        "-n",
        c.NAMESPACE,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": status}),
    )


def _ready(generation: int | None) -> dict[str, Any]:
    """A Ready=True condition, about ``generation`` when one is given."""
    condition: dict[str, Any] = {"type": "Ready", "status": "True", "reason": "StoreServing",
                                 "message": "It answers.", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    return condition | ({"observedGeneration": generation} if generation is not None else {})


def _write_status_to_the_object(lab: Lab) -> None:
    """Send a correct status to the object itself, the way spec is written, instead of to its /status."""
    primary = lab.get("memorystores.store.krmcourse.dev", "primary", namespace="store") or {}
    generation = primary["metadata"]["generation"]
    status = {"observedGeneration": generation, "conditions": [_ready(generation)]}
    lab.kubectl("patch", "memorystores.store.krmcourse.dev", "primary", "-n", "store", "--type=merge",
                "-p", json.dumps({"status": status}))


def _report_without_a_generation(lab: Lab) -> None:
    """Write Ready=True through /status, but leave out which generation of the spec it is about."""
    lab.kubectl("patch", "memorystores.store.krmcourse.dev", "primary", "-n", "store", "--subresource=status",
                "--type=merge", "-p", json.dumps({"status": {"conditions": [_ready(None)]}}))


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "write the status to the object, not to /status": _write_status_to_the_object,
    "report Ready without observedGeneration": _report_without_a_generation,
}
