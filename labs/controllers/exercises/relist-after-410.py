"""Exercise: the scratch controller's resume loop (client-go's way: resume each watch from the last
resourceVersion seen) must list again when the server answers 410 Gone, or it never sees another change.

The check makes the running controller meet a real 410: it cuts the controller's watches (SIGUSR1, an
outage of a few seconds) and, while it is away, changes the Greeting CRD, which makes the API server
build a new watch cache for Greetings with no history before it. The controller's resume then answers
410. After that, the check creates or changes demo/late and wants it reconciled, by that controller.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from typing import Any

from krmcourse import CheckFailed, Lab
from krmcourse.labcode import lab_module

model = lab_module("controllers", "greeter.model")

CONTROLLER, NAMESPACE, LATE = "greeter-scratch", "demo", "late"
CRD = f"{model.PLURAL}.{model.GROUP}"
COLLECTION = f"/apis/{model.API_VERSION}/namespaces/{NAMESPACE}/{model.PLURAL}"
DOCS = "A greeting in one language; its controller writes the message into a ConfigMap."
ARGS = ("--namespace", NAMESPACE, "--watch-timeout", "8")


def _lines(lab: Lab) -> list[str]:
    return lab.logs(CONTROLLER, lines=10**7).splitlines()


def _since(lab: Lab, mark: int) -> str:
    return "\n".join(_lines(lab)[mark:])


def _this_run(lab: Lab) -> str:
    log = "\n".join(_lines(lab))
    return log[log.rfind("greeter-scratch starting"):]


def _within(lab: Lab, fn: Callable[[], Any], timeout: float) -> Any:
    try:
        return lab.wait_until(fn, timeout=timeout)
    except TimeoutError:
        return None


def _upgrade_the_crd(lab: Lab) -> None:
    """A new revision of the Greeting CRD (its schema's description, on or off): any change to a CRD's
    spec makes the API server rebuild that resource's storage, watch cache included."""
    crd = lab.get("customresourcedefinition", CRD)
    assert crd is not None
    path = "/spec/versions/0/schema/openAPIV3Schema/description"
    has = "description" in crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    patch = {"op": "remove", "path": path} if has else {"op": "add", "path": path, "value": DOCS}
    lab.kubectl("patch", "customresourcedefinition", CRD, "--type=json", "-p", json.dumps([patch]))


def _expired(lab: Lab, resource_version: str) -> bool:
    """Does a watch from this resourceVersion answer 410 now (the new watch cache serves Greetings)?"""
    out = lab.kubectl("get", "--raw", f"{COLLECTION}?watch=true&resourceVersion={resource_version}&timeoutSeconds=1",
                      check=False)
    return '"code":410' in out


def _stopped(lab: Lab) -> str | None:
    return next((line for line in _this_run(lab).splitlines()
                 if "greetings:" in line and "sees no more changes" in line), None)


def _meet_a_410(lab: Lab, pid: int) -> int:
    """Make the controller resume a Greetings watch from a resourceVersion the server has forgotten.
    Returns the log line count from before; raises CheckFailed when it never resumes a watch."""
    for _attempt in range(3):
        if (line := _stopped(lab)) is not None:
            raise CheckFailed(f"The scratch controller's Greetings informer has stopped watching; its log says: "
                              f"{line.strip()!r}. No change in {NAMESPACE} reaches it any more.")
        mark = len(_lines(lab))
        os.kill(pid, signal.SIGUSR1)
        if not _within(lab, lambda m=mark: "greetings: watch dropped" in _since(lab, m), 20):
            raise CheckFailed("The scratch controller's Greetings informer did not react when its watch was cut "
                              "(SIGUSR1): it is not watching any more. Its log (lab.logs('greeter-scratch')) "
                              "shows where it stopped.")
        before = json.loads(lab.kubectl("get", "--raw", f"{COLLECTION}?limit=1"))["metadata"]["resourceVersion"]
        _upgrade_the_crd(lab)
        lab.wait_until(lambda rv=before: _expired(lab, rv), timeout=30,
                       message="the API server still serves Greetings from the old watch cache")
        if "greetings: reconnecting" in _since(lab, mark):
            continue  # it came back before the new cache served: no 410 for it this time; again
        after = lab.wait_until(lambda m=mark: "greetings: reconnecting" in (s := _since(lab, m)) and s, timeout=30,
                               message="the scratch controller never reconnected after its outage")
        if "greetings: reconnecting: re-listing" in after:
            raise CheckFailed("The scratch controller lists again after every watch, so it never resumes a watch "
                              "and never meets 410 Gone: it runs without a resume loop of yours (--watch-loop).")
        if not _within(lab, lambda m=mark: "greetings: watch from resourceVersion" in _since(lab, m)
                       and "410 Gone" in _since(lab, m), 20):
            raise CheckFailed("The scratch controller reconnected but did not resume its Greetings watch; its "
                              "log since the outage shows what it did instead.")
        return mark
    raise CheckFailed("The scratch controller came back from its outage before the API server had rebuilt its "
                      "watch cache, three times: it never met 410 Gone. Is the machine very busy? Check again.")


def _touch_late(lab: Lab) -> int:
    """Create demo/late, or change it: either way a generation the controller has not seen."""
    stamp = time.strftime("%H:%M:%S")
    lab.apply({"apiVersion": model.API_VERSION, "kind": model.KIND,
               "metadata": {"name": LATE, "namespace": NAMESPACE},
               "spec": {"to": f"the check at {stamp}", "language": "en"}})
    late = lab.get(model.PLURAL, LATE, namespace=NAMESPACE)
    assert late is not None
    return int(late["metadata"]["generation"])


def _reconciled(lab: Lab) -> bool:
    late = lab.get(model.PLURAL, LATE, namespace=NAMESPACE)
    configmap = lab.get("configmap", f"greeting-{LATE}", namespace=NAMESPACE)
    return (model.is_reconciled(late) and configmap is not None and late is not None
            and configmap.get("data", {}).get("message") == model.render(late)[0])


def check(lab: Lab) -> None:
    pid = lab.running().get(CONTROLLER)
    if pid is None:
        raise CheckFailed(f"The scratch controller ({CONTROLLER}) is not running, so nothing in {NAMESPACE} "
                          "watches Greetings, and nothing can meet a 410.")
    mark = _meet_a_410(lab, pid)
    generation = _touch_late(lab)
    if not _within(lab, lambda: _reconciled(lab), 20):
        late = lab.get(model.PLURAL, LATE, namespace=NAMESPACE) or {}
        seen = late.get("status", {}).get("observedGeneration")
        gone = next(line for line in _since(lab, mark).splitlines() if "410 Gone" in line)
        raise CheckFailed(f"The controller met 410 Gone ({gone.strip()!r}). Since then {NAMESPACE}/{LATE} was "
                          f"created or changed (generation {generation}), and its status still describes "
                          f"generation {seen}: the Greetings informer no longer sees changes.")
    after_gone = _since(lab, mark).split("410 Gone", 1)[-1]
    if "greetings: listed" not in after_gone:
        raise CheckFailed(f"{NAMESPACE}/{LATE} was reconciled, but after 410 Gone the Greetings informer never listed "
                          "again: a watch from the start replays what exists now, yet says nothing of what was "
                          "deleted during the outage, so those objects stay in the cache for good.",
                          "After informer.Expired, replace the cache with a fresh list (informer.relist()) and "
                          "watch from the list's resourceVersion.")


def solve(lab: Lab) -> None:
    async def keep_watching(informer, resource_version):
        """Resume each watch from the last resourceVersion seen; after 410 Gone, list again."""
        while True:
            try:
                resource_version = await informer.watch(resource_version)
            except informer.Expired:
                # The server has no history back to resource_version: what changed since is unknown,
                # so list everything again (replacing the cache) and watch from the new list.
                resource_version = await informer.relist()

    path = lab.save_code("keep-watching", keep_watching)
    lab.start(CONTROLLER, *ARGS, "--watch-loop", str(path))


async def _as_given(informer, resource_version):  # noqa: ANN001, ANN202 (the notebook's, unannotated)
    """The resume loop as the notebook gives it: after 410 it tries the same resourceVersion again."""
    import asyncio

    while True:
        try:
            resource_version = await informer.watch(resource_version)
        except informer.Expired:
            await asyncio.sleep(1)


async def _give_up(informer, resource_version):  # noqa: ANN001, ANN202
    while True:
        try:
            resource_version = await informer.watch(resource_version)
        except informer.Expired:
            return


async def _watch_from_now(informer, resource_version):  # noqa: ANN001, ANN202
    """After 410, watch from "" (the current state, replayed as additions) instead of listing."""
    while True:
        try:
            resource_version = await informer.watch(resource_version)
        except informer.Expired:
            resource_version = await informer.watch("")


def _run(lab: Lab, loop: Callable[..., Any]) -> None:
    lab.start(CONTROLLER, *ARGS, "--watch-loop", str(lab.save_code("keep-watching", loop)))


def _restart_by_hand(lab: Lab) -> None:
    """The loop as given, stuck after a 410; then a restart, whose first list catches up once."""
    _run(lab, _as_given)
    lab.stop(CONTROLLER)
    _run(lab, _as_given)


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "the resume loop as given (the same resourceVersion again after 410)": lambda lab: _run(lab, _as_given),
    "stop watching on 410": lambda lab: _run(lab, _give_up),
    "watch from the current state after 410, without a list": lambda lab: _run(lab, _watch_from_now),
    "restart the controller by hand": _restart_by_hand,
    "the built-in loop, which lists after every watch (no resume loop)": lambda lab: lab.start(CONTROLLER, *ARGS),
}
