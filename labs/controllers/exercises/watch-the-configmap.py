"""Exercise: kopf's Greeting controller (greeter-kopf) reacts to Greetings only, so a ConfigMap it owns can
be edited or deleted behind its back and stays that way. The learner writes a function that registers a
kopf handler for those ConfigMaps, calling memo.repair; greeter-kopf loads it from the file that
GREETER_CONFIGMAP_HANDLERS names (saved by lab.save_code).

The check creates two Greetings in kopf-demo and waits for their ConfigMaps. Then it edits the data of one
ConfigMap and deletes the other, and wants both back within REPAIR_WAIT seconds with neither Greeting
written meanwhile. memo.repair logs what it puts back and for which object's handler (kopf gives each
handler a logger that carries its object), so the controller's log says who noticed: a ConfigMap's
handler (the idea) or a Greeting's (a timer, that is a poll).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from krmcourse import CheckFailed, Lab
from krmcourse.labcode import lab_module

model = lab_module("controllers", "greeter.model")

CONTROLLER, NAMESPACE, ENV = "greeter-kopf", "kopf-demo", "GREETER_CONFIGMAP_HANDLERS"
EDITED, DELETED = "moin", "hoi"  # the Greetings whose ConfigMaps the check edits and deletes
GREETINGS = {EDITED: ("Hamburg", "de"), DELETED: ("wereld", "nl")}
REPAIR_WAIT = 10  # seconds; a handler that a ConfigMap's change wakes needs well under one
KOPF_NOTES = f"kopf.{model.GROUP}/"  # kopf's bookkeeping annotations on a Greeting (kopf_controller.py)
CODE_NAME = "configmap-handlers"

Obj = dict[str, Any]


def _within(lab: Lab, fn: Callable[[], Any], timeout: float) -> Any:
    try:
        return lab.wait_until(fn, timeout=timeout)
    except TimeoutError:
        return None


def _configmap_of(name: str) -> str:
    return model.configmap_name({"metadata": {"name": name}})


def _greeting(lab: Lab, name: str) -> Obj | None:
    return lab.get(model.PLURAL, name, namespace=NAMESPACE)


def _settled(greeting: Obj | None) -> bool:
    """Reconciled, and kopf done with it: of its bookkeeping, only the diff-base annotation is left."""
    if not model.is_reconciled(greeting):
        return False
    assert greeting is not None
    notes = {key.removeprefix(KOPF_NOTES) for key in greeting["metadata"].get("annotations", {})
             if key.startswith(KOPF_NOTES)}
    return notes == {"last-handled-configuration"}


def _wrong_with_configmap(lab: Lab, name: str) -> str | None:
    """What is wrong with the ConfigMap of the Greeting `name`, or None when it is what the Greeting wants."""
    greeting, configmap = _greeting(lab, name), lab.get("configmap", _configmap_of(name), namespace=NAMESPACE)
    if greeting is None:
        return f"the Greeting {NAMESPACE}/{name} is gone"
    if configmap is None:
        return f"{_configmap_of(name)} is gone"
    message = model.render(greeting)[0]
    if model.configmap_differs(configmap, model.desired_configmap(greeting, message)):
        return f"{_configmap_of(name)} says {configmap.get('data', {}).get('message')!r}, not {message!r}"
    return None


def _log(lab: Lab) -> list[str]:
    return lab.logs(CONTROLLER, lines=10**7).splitlines()


def _repairs(lines: list[str], configmap: str) -> list[str]:
    """memo.repair's log lines since a mark that put `configmap` back: "... (repair asked by a handler of
    KIND NAMESPACE/NAME)"."""
    return [line for line in lines if f"ConfigMap {configmap} (repair asked by" in line]


def _start_greetings(lab: Lab) -> None:
    """Both Greetings there and reconciled, and their ConfigMaps right; CheckFailed if not."""
    lab.apply([{"apiVersion": model.API_VERSION, "kind": model.KIND,
                "metadata": {"name": name, "namespace": NAMESPACE},
                "spec": {"to": to, "language": language}} for name, (to, language) in GREETINGS.items()])
    for name in GREETINGS:
        if not _within(lab, lambda n=name: _settled(_greeting(lab, n)), 30):
            raise CheckFailed(f"{CONTROLLER} did not reconcile the Greeting {NAMESPACE}/{name} within 30 s: its "
                              "status does not say Ready for its generation.",
                              f"Read what it says: lab.logs('{CONTROLLER}'). A function of yours that fails as "
                              "the controller loads it stops the controller.")
    for name in GREETINGS:
        if not _within(lab, lambda n=name: _wrong_with_configmap(lab, n) is None, REPAIR_WAIT):
            raise CheckFailed(f"Before the check changed anything, {_wrong_with_configmap(lab, name)} (left over from "
                              f"an earlier run, or your own edit), and {CONTROLLER} has not put it back in "
                              f"{REPAIR_WAIT} s: nothing tells it that a ConfigMap changed.",
                              "Give it a handler for the ConfigMaps that Greetings own, one that calls "
                              "memo.repair for the owning Greeting, and start it with that.")


def check(lab: Lab) -> None:
    if CONTROLLER not in lab.running():
        raise CheckFailed(f"{CONTROLLER} is not running, so nothing in {NAMESPACE} reconciles Greetings or the "
                          "ConfigMaps they own.",
                          f"Run the exercise's cell: it saves your function and starts {CONTROLLER} with it "
                          f"({ENV}).")
    _start_greetings(lab)
    before = {name: (_greeting(lab, name) or {})["metadata"] for name in GREETINGS}
    mark = len(_log(lab))

    edited, deleted = _configmap_of(EDITED), _configmap_of(DELETED)
    started = time.monotonic()
    lab.kubectl("patch", "configmap", edited, "-n", NAMESPACE, "--type=merge",
                "-p", json.dumps({"data": {"message": "edited by hand"}}))
    lab.delete("configmap", deleted, namespace=NAMESPACE)
    if not _within(lab, lambda: all(_wrong_with_configmap(lab, n) is None for n in GREETINGS), REPAIR_WAIT):
        still = "; ".join(w for n in GREETINGS if (w := _wrong_with_configmap(lab, n)))
        why = (f"{edited} is back, so a handler saw the edit; a deletion is a change too, and it did not see that."
               if _wrong_with_configmap(lab, EDITED) is None else
               f"{CONTROLLER} watches Greetings, and neither Greeting changed.")
        raise CheckFailed(f"The check edited {edited}'s data and deleted {deleted}. {REPAIR_WAIT} s later, {still}. "
                          f"{why}",
                          "Register a kopf handler for the ConfigMaps that Greetings own, which runs on every "
                          "change to one, deletion included, and calls memo.repair for its Greeting.")
    took = time.monotonic() - started

    for name in GREETINGS:
        now = (_greeting(lab, name) or {})["metadata"]
        was = before[name]
        if (now["generation"], now["resourceVersion"]) != (was["generation"], was["resourceVersion"]):
            raise CheckFailed(f"The ConfigMaps came back ({took:.1f} s), but the Greeting {NAMESPACE}/{name} was "
                              f"written meanwhile (generation {was['generation']} -> {now['generation']}, "
                              f"resourceVersion {was['resourceVersion']} -> {now['resourceVersion']}). The "
                              "ConfigMap's own change should bring it back; the Greeting has not changed.",
                              "Repair from the ConfigMap's handler with memo.repair, and leave the Greeting alone.")

    def by_own_handler(configmap: str) -> bool:
        asked = f"a handler of ConfigMap {NAMESPACE}/{configmap})"
        return any(line.rstrip().endswith(asked) for line in _repairs(_log(lab)[mark:], configmap))

    if _within(lab, lambda: by_own_handler(edited) and by_own_handler(deleted), 5):
        return
    repairs = [line for c in (edited, deleted) for line in _repairs(_log(lab)[mark:], c) if not by_own_handler(c)]
    if repairs:
        said = repairs[0].rsplit("] ", 1)[-1].strip()
        raise CheckFailed(f"The ConfigMaps came back ({took:.1f} s), but not from a handler of theirs: "
                          f"{CONTROLLER}'s log says {said!r}. A handler of the Greeting that repairs anyway is a "
                          "poll (a timer): it repairs only when it next comes round, and works on every Greeting, "
                          "changed or not.",
                          "Let the ConfigMap's own change wake the controller: a handler for the ConfigMaps, "
                          "which kopf runs as soon as its watch reports the change.")
    raise CheckFailed(f"The ConfigMaps came back ({took:.1f} s), but {CONTROLLER}'s log has no line from memo.repair "
                      f"that says a handler of {edited} and {deleted} put them back.",
                      "Repair with memo.repair(namespace, name, logger), passing the logger kopf gives your "
                      f"ConfigMap handler; lab.logs('{CONTROLLER}') shows what it did.")


def solve(lab: Lab) -> None:
    def watch_configmaps():
        """Register kopf handlers for the ConfigMaps that Greetings own (called once, as greeter-kopf loads)."""
        import kopf

        @kopf.on.event("configmaps", labels={"controllers.krmcourse.dev/greeting": kopf.PRESENT})
        async def put_back(body, memo, logger, **_):
            """Any change to a Greeting's ConfigMap, deletion included: make it what its Greeting wants."""
            for owner in body.metadata.get("ownerReferences", []):
                if owner["kind"] == "Greeting":
                    await memo.repair(body.metadata.namespace, owner["name"], logger)

    _run(lab, watch_configmaps)


def _run(lab: Lab, handlers: Callable[[], None]) -> None:
    path = lab.save_code(CODE_NAME, handlers)
    lab.start(CONTROLLER, env={ENV: str(path)})


def _timer_on_greetings():  # noqa: ANN202 (a learner's, unannotated)
    import kopf

    @kopf.timer("controllers.krmcourse.dev", "v1alpha1", "greetings", interval=1)
    async def every_second(name, namespace, memo, logger, **_):
        await memo.repair(namespace, name, logger)


def _on_update_only():  # noqa: ANN202
    import kopf

    @kopf.on.update("configmaps", labels={"controllers.krmcourse.dev/greeting": kopf.PRESENT})
    async def put_back(body, memo, logger, **_):
        await memo.repair(body.metadata.namespace, body.metadata.labels["controllers.krmcourse.dev/greeting"],
                          logger)


def _by_hand(lab: Lab) -> None:
    """The controller as it comes; the learner sees a ConfigMap not come back and puts it back by hand."""
    lab.start(CONTROLLER)
    lab.apply([{"apiVersion": model.API_VERSION, "kind": model.KIND,
                "metadata": {"name": name, "namespace": NAMESPACE},
                "spec": {"to": to, "language": language}} for name, (to, language) in GREETINGS.items()])
    for name in GREETINGS:
        greeting = lab.wait_until(lambda n=name: _settled(g := _greeting(lab, n)) and g, timeout=30)
        lab.apply(model.desired_configmap(greeting, model.render(greeting)[0]))


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "the controller as it comes (handlers for Greetings only)": lambda lab: lab.start(CONTROLLER),
    "put the ConfigMaps back by hand": _by_hand,
    "a kopf timer on Greetings that repairs every second": lambda lab: _run(lab, _timer_on_greetings),
    "an on.update handler on ConfigMaps (a deletion is no update)": lambda lab: _run(lab, _on_update_only),
}
