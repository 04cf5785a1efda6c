"""Plumbing for the controllers lab's exercises: a Greeting whose fault is drawn per lab cluster.

:func:`misfiled_greeting` makes, once per cluster, a Greeting with a drawn name whose ``spec.language`` names
its language in a code the controller does not support (another standard's code for it: ``deu``, ``fre``...),
and whose ``to`` is written in that language. Which language was meant is kept only as a digest, bound to the
Greeting's uid, so the check can tell the right fix from any other supported code without saying which it is.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

from krmcourse import Lab

NAMESPACE = "demo"
MEANT = "controllers.krmcourse.dev/meant"  # annotation: a digest of the uid and the language meant
_ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"  # no 0/o, 1/l/i: names are read off a screen
#: For each supported language: codes of other standards that name it, and "world" in it.
_MISFILED = {
    "de": (["deu", "ger"], "Welt"),
    "es": (["spa", "esp"], "mundo"),
    "fr": (["fra", "fre"], "le monde"),
    "nl": (["nld", "dut"], "wereld"),
}


def digest(uid: str, language: str) -> str:
    return hashlib.sha256(f"{uid}:{language}".encode()).hexdigest()[:16]


def misfiled(lab: Lab) -> dict[str, Any] | None:
    """The drawn Greeting (None before :func:`misfiled_greeting` has run, or once it is deleted)."""
    return next((g for g in lab.objects("greetings.controllers.krmcourse.dev", NAMESPACE)
                 if MEANT in (g["metadata"].get("annotations") or {})), None)


def misfiled_greeting(lab: Lab) -> str:
    """Once per cluster: a Greeting in demo whose language code the controller does not support. Its name."""
    found = misfiled(lab)
    if found is not None:
        return str(found["metadata"]["name"])
    rng = secrets.SystemRandom()
    meant = rng.choice(sorted(_MISFILED))
    codes, world = _MISFILED[meant]
    name = "greet-" + "".join(rng.choice(_ALPHABET) for _ in range(5))
    lab.kubectl("create", "-f", "-", input=(
        f"apiVersion: controllers.krmcourse.dev/v1alpha1\nkind: Greeting\n"
        f"metadata: {{name: {name}, namespace: {NAMESPACE}}}\n"
        f"spec: {{to: {world!r}, language: {rng.choice(codes)}}}\n"))
    uid = lab.get("greetings.controllers.krmcourse.dev", name, namespace=NAMESPACE)["metadata"]["uid"]
    lab.kubectl("annotate", "greetings.controllers.krmcourse.dev", name, "-n", NAMESPACE,
                f"{MEANT}={digest(uid, meant)}")
    return name
