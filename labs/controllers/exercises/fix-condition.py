"""Exercise: a Greeting reports Ready=False. Read why, fix its spec, see it become Ready.

The Greeting is drawn per lab cluster (``greetlab.misfiled_greeting``): its name, and the language it was
meant to greet in, which its spec names in another standard's code (``deu``, ``fre``...) that the controller
does not support. The condition's message lists the codes it does support; the Greeting's own ``to`` and its
code say which of them was meant. hola, which the page shows and names, is not the one.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from krmcourse import CheckFailed, Lab
from krmcourse.labcode import lab_module

# The lab's own greeter package, as the notebook uses it.
model, once = lab_module("controllers", "greeter.model"), lab_module("controllers", "greeter.once")

NAMESPACE = "demo"
GREETINGS = "greetings.controllers.krmcourse.dev"


def check(lab: Lab) -> None:
    greetlab = lab.support("greetlab")
    greeting = greetlab.misfiled(lab)
    if greeting is None:
        raise CheckFailed("The Greeting of this exercise is not in demo yet: the exercise's first cell makes it, "
                          "and it has not run since the lab started (or the Greeting was deleted).")
    name = greeting["metadata"]["name"]
    language = greeting.get("spec", {}).get("language")
    if language not in model.TEMPLATES:
        raise CheckFailed(
            f"{name} still asks for language {language!r}, which the controller does not support. "
            "Its Ready condition's message lists the languages it does support."
        )
    meant = greeting["metadata"]["annotations"][greetlab.MEANT]
    if greetlab.digest(greeting["metadata"]["uid"], language) != meant:
        raise CheckFailed(f"{name} now asks for {language!r}, which the controller supports, but it is not the "
                          f"language {name} was written in: its spec says whom it greets, in which language.")
    status = greeting.get("status", {})
    generation = greeting["metadata"]["generation"]
    if status.get("observedGeneration") != generation:
        raise CheckFailed(
            f"{name}'s spec is at generation {generation}, but its status describes generation "
            f"{status.get('observedGeneration')}: no controller has reconciled the change yet."
        )
    ready = model.ready_condition(greeting)
    if ready is None or ready.get("status") != "True":
        raise CheckFailed(f"{name}'s Ready condition is {ready}; it should be True.")
    configmap = lab.get("configmap", model.configmap_name(greeting), namespace=NAMESPACE)
    expected = model.render(greeting)[0]
    if configmap is None or configmap.get("data", {}).get("message") != expected:
        raise CheckFailed(f"{name} says Ready, but its ConfigMap {model.configmap_name(greeting)} does not hold "
                          "the rendered message.")


def _meant(lab: Lab, name: str) -> str:
    """The supported code that names the Greeting's language: 'fre' starts like 'fr', 'deu' like 'de'...,
    and the few that do not ('ger', 'dut', 'esp') are told by whom it greets."""
    spec = lab.get(GREETINGS, name, namespace=NAMESPACE)["spec"]
    by_world = {"Welt": "de", "mundo": "es", "le monde": "fr", "wereld": "nl"}
    return by_world[spec["to"]]


def solve(lab: Lab) -> None:
    name = lab.support("greetlab").misfiled_greeting(lab)
    lab.kubectl("patch", GREETINGS, name, "-n", NAMESPACE, "--type=merge",
                "-p", json.dumps({"spec": {"language": _meant(lab, name)}}))
    # The same reconcile the controller runs, once; harmless if a controller is running too.
    once.reconcile_now(lab.kubeconfig, NAMESPACE, name)
    lab.wait_until(
        lambda: model.is_reconciled(lab.get(GREETINGS, name, namespace=NAMESPACE)),
        timeout=30,
        message=f"{name} did not become Ready after the fix",
    )


def _fix_hola(lab: Lab) -> None:
    """The answer the page once gave: hola patched to es, the Greeting the page names."""
    lab.support("greetlab").misfiled_greeting(lab)
    lab.kubectl("patch", GREETINGS, "hola", "-n", NAMESPACE, "--type=merge", "-p", '{"spec":{"language":"es"}}')
    once.reconcile_now(lab.kubeconfig, NAMESPACE, "hola")


def _any_supported_code(lab: Lab) -> None:
    """Pick the first supported code that is not the one meant: Ready, but in the wrong language."""
    name = lab.support("greetlab").misfiled_greeting(lab)
    wrong = next(code for code in sorted(model.TEMPLATES) if code != _meant(lab, name))
    lab.kubectl("patch", GREETINGS, name, "-n", NAMESPACE, "--type=merge",
                "-p", json.dumps({"spec": {"language": wrong}}))
    once.reconcile_now(lab.kubeconfig, NAMESPACE, name)


def _write_ready_by_hand(lab: Lab) -> None:
    """Make the status say Ready without changing what the spec asks for."""
    name = lab.support("greetlab").misfiled_greeting(lab)
    greeting = lab.get(GREETINGS, name, namespace=NAMESPACE)
    assert greeting is not None
    generation = greeting["metadata"]["generation"]
    status = {"observedGeneration": generation,
              "conditions": [{"type": "Ready", "status": "True", "reason": "Reconciled", "message": "fine",
                              "observedGeneration": generation, "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    lab.kubectl("patch", GREETINGS, name, "-n", NAMESPACE, "--subresource=status", "--type=merge",
                "-p", json.dumps({"status": status}))


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "copied from the page: hola patched to es": _fix_hola,
    "any supported language code": _any_supported_code,
    "write Ready=True into the status by hand": _write_ready_by_hand,
}
