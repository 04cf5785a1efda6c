"""How an App's policyRef resolves to one of the twins, and whether the image passes it.

The rules (the notebook states them too):
  1. policyRef.kind is ImagePolicy unless it says ClusterImagePolicy (the CRD defaults it).
  2. An ImagePolicy is looked up only in the App's own namespace: a team can never borrow, or be
     bound by, another team's policy.
  3. A ClusterImagePolicy is looked up by name at cluster scope.
  4. There is no silent fallback from one kind to the other: a missing policy is reported, not guessed.

The logic takes a `get(kind, name, namespace)` function, so the controller (kr8s) and the exercise
checks (lab.get) run exactly the same code against the real API server.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Getter = Callable[[str, str, str | None], dict[str, Any] | None]

KINDS = {
    "ImagePolicy": "imagepolicies.twins.krmcourse.dev",
    "ClusterImagePolicy": "clusterimagepolicies.twins.krmcourse.dev",
}


@dataclass(frozen=True)
class Verdict:
    """The outcome for one App: which policy applied (if any), and the Admitted condition."""

    policy: str
    admitted: bool
    reason: str
    message: str


def image_allowed(image: str, registries: list[str]) -> bool:
    """An image passes when it starts with an allowed prefix and then '/'.

    The slash matters: prefix 'teams.example.com/a' must not allow 'teams.example.com/ab/...'.
    """
    return any(image.startswith(prefix.rstrip("/") + "/") for prefix in registries)


def resolve(app: dict[str, Any], get: Getter) -> Verdict:
    """Apply the lookup rules to one App and judge its image."""
    ref = app.get("spec", {}).get("policyRef", {})
    kind = ref.get("kind") or "ImagePolicy"
    name = ref.get("name", "")
    if kind not in KINDS:
        message = f"policyRef.kind {kind!r} is not one of {sorted(KINDS)}"
        return Verdict("", False, "InvalidPolicyRef", message)
    namespace = app["metadata"]["namespace"] if kind == "ImagePolicy" else None
    where = f"{kind}/{name}" + (f" in namespace {namespace}" if namespace else "")
    policy = get(KINDS[kind], name, namespace)
    if policy is None:
        return Verdict("", False, "PolicyNotFound", f"{where} does not exist")
    registries = policy.get("spec", {}).get("allowedRegistries", [])
    image = app.get("spec", {}).get("image", "")
    if not image_allowed(image, registries):
        message = f"{image} is not from {registries} ({where})"
        return Verdict(f"{kind}/{name}", False, "ImageNotAllowed", message)
    return Verdict(f"{kind}/{name}", True, "PolicyAllows", f"{image} is allowed by {where}")
