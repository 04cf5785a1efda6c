"""Status conditions as Kubernetes API conventions describe them, for every reference controller.

A condition is a ``metav1.Condition``-shaped dict: ``type``, ``status`` ("True"/"False"), ``reason``,
``message``, ``observedGeneration`` and ``lastTransitionTime``, which changes only when ``status``
does. Plain dicts and the standard library only, so that any controller can use it, however small.
"""

from __future__ import annotations

import time
from typing import Any


def condition(type_: str, ok: bool, reason: str, message: str, generation: int | None) -> dict[str, Any]:
    """A condition without its lastTransitionTime, which :func:`merge_conditions` fills in."""
    return {
        "type": type_,
        "status": "True" if ok else "False",
        "reason": reason,
        "message": message,
        "observedGeneration": generation or 0,
    }


def merge_conditions(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``new``, with each lastTransitionTime kept from ``old`` when that condition's status did not change."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    by_type = {c.get("type"): c for c in old}
    merged = []
    for cond in new:
        before = by_type.get(cond["type"])
        keep = before is not None and before.get("status") == cond["status"] and before.get("lastTransitionTime")
        stamp = before["lastTransitionTime"] if keep and before is not None else now
        merged.append({**cond, "lastTransitionTime": stamp})
    return merged


def ready_condition(obj: dict[str, Any], ok: bool, reason: str, message: str) -> dict[str, Any]:
    """``obj``'s Ready condition as it should be now, for the generation of ``obj`` the caller acted on."""
    old = (obj.get("status") or {}).get("conditions") or []
    new = condition("Ready", ok, reason, message, obj["metadata"].get("generation"))
    return merge_conditions(old, [new])[0]


def same_status(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether two statuses are equal apart from condition timestamps: then there is nothing to write.

    This matters with watches: every status write is itself an event that wakes the next pass, so a
    controller that rewrote an unchanged status would wake itself forever.
    """

    def strip(status: dict[str, Any]) -> dict[str, Any]:
        out = dict(status)
        out["conditions"] = [
            {k: v for k, v in c.items() if k != "lastTransitionTime"} for c in status.get("conditions", [])
        ]
        return out

    return strip(old) == strip(new)
