"""Exercise: the Greeting demo/hola reports Ready=False. Read why, fix its spec, see it become Ready."""

from __future__ import annotations

import json
from collections.abc import Callable

from krmcourse import CheckFailed, Lab
from krmcourse.labcode import lab_module

# The lab's own greeter package, as the notebook uses it.
model, once = lab_module("controllers", "greeter.model"), lab_module("controllers", "greeter.once")

NAMESPACE, NAME = "demo", "hola"


def check(lab: Lab) -> None:
    hola = lab.get("greeting", NAME, namespace=NAMESPACE)
    if hola is None:
        raise CheckFailed("The Greeting demo/hola is gone; this exercise needs it (lab.reset() brings it back).")
    language = hola.get("spec", {}).get("language")
    if language not in model.TEMPLATES:
        raise CheckFailed(
            f"hola still asks for language {language!r}, which the controller does not support. "
            "Its Ready condition's message lists the languages it does support."
        )
    status = hola.get("status", {})
    generation = hola["metadata"]["generation"]
    if status.get("observedGeneration") != generation:
        raise CheckFailed(
            f"hola's spec is at generation {generation}, but its status describes generation "
            f"{status.get('observedGeneration')}: no controller has reconciled the change yet."
        )
    ready = model.ready_condition(hola)
    if ready is None or ready.get("status") != "True":
        raise CheckFailed(f"hola's Ready condition is {ready}; it should be True.")
    configmap = lab.get("configmap", "greeting-hola", namespace=NAMESPACE)
    expected = model.render(hola)[0]
    if configmap is None or configmap.get("data", {}).get("message") != expected:
        raise CheckFailed("hola says Ready, but its ConfigMap greeting-hola does not hold the rendered message.")


def solve(lab: Lab) -> None:
    lab.kubectl("patch", "greeting", NAME, "-n", NAMESPACE, "--type=merge", "-p", '{"spec":{"language":"es"}}')
    # The same reconcile the controller runs, once; harmless if a controller is running too.
    once.reconcile_now(lab.kubeconfig, NAMESPACE, NAME)
    lab.wait_until(
        lambda: model.is_reconciled(lab.get("greeting", NAME, namespace=NAMESPACE)),
        timeout=30,
        message="hola did not become Ready after the fix",
    )


def _write_ready_by_hand(lab: Lab) -> None:
    """Make the status say Ready without changing what the spec asks for."""
    hola = lab.get("greeting", NAME, namespace=NAMESPACE)
    assert hola is not None
    status = {"observedGeneration": hola["metadata"]["generation"],
              "conditions": [{"type": "Ready", "status": "True", "reason": "Reconciled", "message": "fine",
                              "observedGeneration": hola["metadata"]["generation"],
                              "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    lab.kubectl("patch", "greeting", NAME, "-n", NAMESPACE, "--subresource=status", "--type=merge",
                "-p", json.dumps({"status": status}))


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {"write Ready=True into the status by hand": _write_ready_by_hand}
