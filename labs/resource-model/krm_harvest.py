"""The harvest: several pickers add to one counter at once, through a function the learner writes.

The lab's ``pickers`` controller (controllers/pickers.py) runs the learner's ``add_one(raw, path)``
in four threads at once, five rounds, each call meant to put one tomato in the ConfigMap ``basket``.
In every round all four pickers read the basket before any of them writes (the harness holds each
picker's first read until all have read), so every round really is a race: an update that names
the resourceVersion it read meets 409 Conflict three times in each round, and one that does not
name it silently overwrites the others' tomatoes.

The harness writes what it did to the ConfigMap ``harvest-report``; the API server counts the 409s
in its own metrics. The exercise check reads both, and the basket itself.
"""

from __future__ import annotations

import inspect
import json
from typing import Any

from krmcourse import Lab
from krmcourse.apiload import Metrics

NAMESPACE = "model"
BASKET = "basket"
REPORT = "harvest-report"
HARNESS = "pickers-harness"  # the pickers' harness: its user agent, and so its field manager
KEY = "tomatoes"
PICKERS = 4
ROUNDS = 5
#: How long a picker that has read waits for the others to read too: a round is a race only then.
BARRIER_SECONDS = 10
BASKET_PATH = f"/api/v1/namespaces/{NAMESPACE}/configmaps/{BASKET}"
REPORT_PATH = f"/api/v1/namespaces/{NAMESPACE}/configmaps/{REPORT}"


def starting_add_one(raw: Any, path: str) -> Any:
    """Put one tomato in the basket: read how many there are, and write one more."""
    basket = raw.get(path).body
    count = int(basket["data"]["tomatoes"])
    return raw.request("PATCH", path, {"data": {"tomatoes": str(count + 1)}},
                       content_type="application/merge-patch+json")


def prepare_faults(lab: Lab) -> list[str]:
    """For the fault harness (``converges.prepare`` in lab.yaml): the pickers' arguments, with
    :func:`starting_add_one` saved as a learner's code, so that the harness starts a harvest that solves nothing."""
    source = "from __future__ import annotations\n\n\n" + inspect.getsource(starting_add_one)  # it names Any
    return ["--code", str(lab.save_code("fault-probe", source))]


def conflicts(metrics_text: str) -> int:
    """Updates of ConfigMaps that kube-apiserver refused with 409 Conflict since it started (PUT, PATCH, and
    server-side apply, which the API server counts as APPLY)."""
    parsed = Metrics.parse(metrics_text, ["apiserver_request_total"])
    return int(parsed.total("apiserver_request_total", code="409", resource="configmaps", subresource="",
                            verb={"PUT", "PATCH", "APPLY"}))


def tomatoes(lab: Lab) -> int | None:
    """How many tomatoes the basket holds, as the API server stores it (None without a basket)."""
    basket = lab.get("configmap", BASKET, NAMESPACE)
    if basket is None:
        return None
    try:
        return int((basket.get("data") or {}).get(KEY, ""))
    except ValueError:
        return None


def report(lab: Lab) -> dict[str, Any] | None:
    """What the pickers recorded about their last harvest, or None while none has finished.

    Under ``writers`` it also gives the field managers that wrote the report: the harness alone
    (``HARNESS``, from its user agent), unless someone edited it by hand. A value that is not JSON
    is kept as the text it is."""
    cm = lab.get("configmap", REPORT, NAMESPACE, show_managed_fields=True)
    if cm is None:
        return None
    found: dict[str, Any] = {}
    for key, value in (cm.get("data") or {}).items():
        try:
            found[key] = json.loads(value)
        except ValueError:
            found[key] = value
    found["writers"] = sorted({m.get("manager", "?") for m in cm["metadata"].get("managedFields", [])})
    return found


def summary(lab: Lab) -> dict[str, Any]:
    """The last harvest in one row: tomatoes picked and in the basket, conflicts seen by the API server."""
    done = report(lab) or {}
    before = done.get("conflictsBefore")
    return {"picked": done.get("expected"), "in the basket": tomatoes(lab),
            "409s seen by the pickers": done.get("conflictsSeen"),
            "409s counted by the API server": None if before is None else conflicts(lab.metrics()) - before,
            "errors": done.get("errors")}
