"""Exercise: four pickers add to one basket at once, and not a single tomato may be lost.

The learner writes ``add_one(raw, path)``, saves it with ``lab.save_code("add-one", add_one)`` and
starts the lab's ``pickers`` controller with it. The check never runs that function: it reads what
the last harvest left in the cluster. The basket must hold exactly as many tomatoes as were picked,
and kube-apiserver's own request metrics must show that updates of ConfigMaps were refused with 409
Conflict since that harvest began, at least once for every picker that lost a race (the harvest
makes every round a race), so the count is right because conflicts were retried, not because
someone wrote it. A blind merge patch and a PUT without a resourceVersion both lose tomatoes.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import Any

from krmcourse import CheckFailed, Lab


def check(lab: Lab) -> None:
    h = lab.support("krm_harvest")
    done = h.report(lab)
    if done is None:
        raise CheckFailed(
            "No harvest has finished: there is no ConfigMap harvest-report in model. The pickers controller "
            "writes it when it has run add_one (lab.logs('pickers') shows how far it got)."
        )
    if done["writers"] != [h.HARNESS] or not isinstance(done.get("expected"), int):
        raise CheckFailed(
            f"ConfigMap {h.REPORT} was not left as the pickers' harness wrote it (its writers: "
            f"{', '.join(done['writers'])}), so it says nothing about a harvest.",
            "Delete it and start the pickers again with your add_one: lab.start('pickers', '--code', path).")
    if done.get("errors"):
        raise CheckFailed(f"add_one failed during the last harvest: {done['errors'][0]}")
    if done.get("roundsApart"):
        raise CheckFailed(
            f"In a round of the harvest the pickers did not all read the basket within "
            f"{h.BARRIER_SECONDS} s before one of them wrote: add_one kept them apart (a lock, or a wait), so they "
            "never raced, and the harvest stopped there.",
            "Let every picker read and write at once, as separate clients do, and make each write conditional "
            "on what it read.")
    picked, count = done["expected"], h.tomatoes(lab)
    if count is None:
        raise CheckFailed(f"The basket ConfigMap has no whole number under data.{h.KEY}.")
    basket = lab.get("configmap", h.BASKET, h.NAMESPACE) or {}
    if basket.get("metadata", {}).get("resourceVersion") != done.get("basketVersion"):
        raise CheckFailed(
            "The basket was written after the harvest ended, so its count is not the pickers' count.",
            "Leave the basket to the pickers: start them again with your add_one, and they empty it first.")
    if count < picked:
        raise CheckFailed(
            f"{done['pickers']} pickers picked {picked} tomatoes, but the basket holds {count}: {picked - count} "
            "were lost. In every round all pickers read the same basket before any of them wrote, and each "
            "write replaced the others' instead of being refused."
        )
    if count > picked:
        raise CheckFailed(f"{done['pickers']} pickers picked {picked} tomatoes, but the basket holds {count}.")
    races = done["pickers"] - 1
    needed = races * done["rounds"]
    refused = h.conflicts(lab.metrics()) - done["conflictsBefore"]
    if refused < needed or done["conflictsSeen"] < needed:
        raise CheckFailed(
            f"The basket holds {count}, but since the harvest began kube-apiserver refused only {refused} "
            f"ConfigMap updates with 409 Conflict. In each of the {done['rounds']} rounds, {races} of the "
            f"{done['pickers']} pickers wrote a basket that had changed since they read it; a conditional "
            f"write is refused then, so a harvest whose writes named what they read shows at least {needed}."
        )


def solve(lab: Lab) -> None:
    def add_one(raw, path):
        """Put one tomato in the basket; if someone else wrote first (409), read again and retry."""
        while True:
            basket = raw.get(path).body  # its metadata.resourceVersion goes back with the PUT
            basket["data"]["tomatoes"] = str(int(basket["data"]["tomatoes"]) + 1)
            reply = raw.put(path, basket)
            if reply.status != 409:
                return reply

    path = lab.save_code("add-one", add_one)
    lab.start("pickers", "--code", str(path))


def _harvest_with(lab: Lab, add_one: Callable[..., Any]) -> None:
    path = lab.save_code("add-one", inspect.getsource(add_one).replace(add_one.__name__, "add_one", 1))
    lab.start("pickers", "--code", str(path))


def _blind_merge_patch(raw, path):
    """Read the count, then merge-patch count + 1: the patch names no resourceVersion."""
    count = int(raw.get(path).body["data"]["tomatoes"])
    return raw.request("PATCH", path, {"data": {"tomatoes": str(count + 1)}},
                       content_type="application/merge-patch+json")


def _put_without_resource_version(raw, path):
    """PUT the whole object, but drop metadata.resourceVersion "to avoid the 409s"."""
    basket = raw.get(path).body
    basket["metadata"].pop("resourceVersion", None)
    basket["data"]["tomatoes"] = str(int(basket["data"]["tomatoes"]) + 1)
    return raw.put(path, basket)


def _one_at_a_time(raw, path):
    """Hold a lock around read and write, so no two pickers ever race."""
    import threading

    lock = globals().setdefault("LOCK", threading.Lock())
    with lock:
        count = int(raw.get(path).body["data"]["tomatoes"])
        return raw.request("PATCH", path, {"data": {"tomatoes": str(count + 1)}},
                           content_type="application/merge-patch+json")


def _write_the_total_by_hand(lab: Lab) -> None:
    """Harvest with the blind patch, then set the basket to the number picked."""
    _harvest_with(lab, _blind_merge_patch)
    h = lab.support("krm_harvest")
    lab.kubectl("patch", "configmap", h.BASKET, "-n", h.NAMESPACE, "--type=merge",
                "-p", json.dumps({"data": {h.KEY: str(h.PICKERS * h.ROUNDS)}}))


def _write_the_total_and_the_baseline(lab: Lab) -> None:
    """As above, and also set the report's baseline of 409s to 0, so that every 409 ever counted seems new."""
    _write_the_total_by_hand(lab)
    h = lab.support("krm_harvest")
    lab.kubectl("patch", "configmap", h.REPORT, "-n", h.NAMESPACE, "--type=merge",
                "-p", json.dumps({"data": {"conflictsBefore": "0"}}))


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "a blind merge patch of count + 1": lambda lab: _harvest_with(lab, _blind_merge_patch),
    "a PUT that drops the resourceVersion": lambda lab: _harvest_with(lab, _put_without_resource_version),
    "a lock around read and write (no race at all)": lambda lab: _harvest_with(lab, _one_at_a_time),
    "write the final number by hand": _write_the_total_by_hand,
    "write the final number and the report's 409 baseline by hand": _write_the_total_and_the_baseline,
}
