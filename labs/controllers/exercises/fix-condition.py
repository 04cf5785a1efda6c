"""Exercise: the Greeting demo/hola reports Ready=False. Read why, fix its spec, see it become Ready."""

from __future__ import annotations

import sys

from krmcourse import CheckFailed, Lab

NAMESPACE, NAME = "demo", "hola"


def _greeter(lab: Lab):  # noqa: ANN202 - returns the lab's own package
    if str(lab.path) not in sys.path:
        sys.path.insert(0, str(lab.path))
    import greeter.model
    import greeter.once

    return greeter


def check(lab: Lab) -> None:
    greeter = _greeter(lab)
    hola = lab.get("greeting", NAME, namespace=NAMESPACE)
    if hola is None:
        raise CheckFailed(
            "The Greeting demo/hola is gone; this exercise needs it (lab.reset() brings it back)."
        )
    language = hola.get("spec", {}).get("language")
    if language not in greeter.model.TEMPLATES:
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
    ready = greeter.model.ready_condition(hola)
    if ready is None or ready.get("status") != "True":
        raise CheckFailed(f"hola's Ready condition is {ready}; it should be True.")
    configmap = lab.get("configmap", "greeting-hola", namespace=NAMESPACE)
    expected = greeter.model.render(hola)[0]
    if configmap is None or configmap.get("data", {}).get("message") != expected:
        raise CheckFailed(
            "hola says Ready, but its ConfigMap greeting-hola does not hold the rendered message."
        )


def solve(lab: Lab) -> None:
    greeter = _greeter(lab)
    lab.kubectl(
        "patch", "greeting", NAME, "-n", NAMESPACE, "--type=merge", "-p", '{"spec":{"language":"es"}}'
    )
    # The same reconcile the controller runs, once; harmless if a controller is running too.
    greeter.once.reconcile_now(lab.kubeconfig, NAMESPACE, NAME)
    lab.wait_until(
        lambda: greeter.model.is_reconciled(lab.get("greeting", NAME, namespace=NAMESPACE)),
        timeout=30,
        message="hola did not become Ready after the fix",
    )
