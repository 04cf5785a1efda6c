"""Exercise: once a MemoryStore exists, its engine may not change; everything else still may.

This needs a transition rule, a CEL rule that compares ``self`` with ``oldSelf``. The check sends
dry-run patches to the existing MemoryStore ``sessions``: switching its engine must be refused, resizing it
must be accepted, and creating a new MemoryStore of either engine must still work (transition rules do not
apply to creates). A rule that compares the whole spec with ``oldSelf`` freezes the size too, and a rule
on the engine without ``oldSelf`` judges the value instead of the change, so a new MemoryStore is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from krmcourse import CheckFailed, Lab

RULE = {"rule": "self == oldSelf", "message": "engine is immutable; create a new MemoryStore instead"}


def check(lab: Lab) -> None:
    c = lab.support("memorystore_crd")
    if lab.get("memorystores.store.krmcourse.dev", "sessions", namespace=c.NAMESPACE) is None:
        raise CheckFailed(
            "The MemoryStore sessions is missing from the store namespace; reset the lab to get it back."
        )
    switch = c.try_patch(lab, "sessions", {"spec": {"engine": "redis"}})
    if switch.allowed:
        raise CheckFailed(
            "Changing the engine of the existing MemoryStore sessions (memcached) to redis is accepted."
        )
    resize = c.try_patch(lab, "sessions", {"spec": {"sizeGi": 2}})
    if not resize.allowed:
        raise CheckFailed(
            f"Resizing the MemoryStore sessions is refused as well, but only the engine should be "
            f"frozen: {resize.message}"
        )
    for engine in ("redis", "memcached"):
        fresh = c.try_create(lab, c.memory_store("engine-probe", engine=engine, sizeGi=1))
        if not fresh.allowed:
            raise CheckFailed(
                f"Creating a new {engine} MemoryStore is refused: {fresh.message}. A new MemoryStore has no old "
                "engine to keep, so a rule about changing it should not judge creates."
            )


def solve(lab: Lab) -> None:
    c = lab.support("memorystore_crd")

    def without_spec_transition_rules(i: int, version: dict[str, Any]) -> dict[str, Any]:
        # A rule comparing the whole spec with oldSelf (an earlier try) would freeze the size as well.
        spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
        rules = [r for r in spec.get("x-kubernetes-validations", []) if "oldSelf" not in r["rule"]]
        return {"op": "add", "path": c.spec_schema_path(i) + "/x-kubernetes-validations", "value": rules}

    c.patch_crd(
        lab,
        c.for_every_version(lab, without_spec_transition_rules)
        + c.for_every_version(
            lab,
            lambda i, _: {
                "op": "add",
                "path": c.spec_schema_path(i, "engine") + "/x-kubernetes-validations",
                "value": [RULE],
            },
        ),
    )
    c.settle(lab, lambda: lab.solved("immutable-engine"), "the transition rule")


def _add_rule(lab: Lab, rule: str, *fields: str) -> None:
    """Add one CEL rule to spec, or to a field of it, in every version, after the rules already there."""
    c = lab.support("memorystore_crd")

    def op(i: int, version: dict[str, Any]) -> dict[str, Any]:
        node = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
        for name in fields:
            node = node["properties"][name]
        rules = [*node.get("x-kubernetes-validations", []), {"rule": rule, "message": "engine is immutable"}]
        return {"op": "add", "path": c.spec_schema_path(i, *fields) + "/x-kubernetes-validations", "value": rules}

    c.patch_crd(lab, c.for_every_version(lab, op))


def _judge_the_value_not_the_change(lab: Lab) -> None:
    """A rule on the engine without oldSelf: it pins the value sessions has, and so refuses new redis stores."""
    c = lab.support("memorystore_crd")
    _add_rule(lab, "self == 'memcached'", "engine")
    c.settle(lab, lambda: not c.try_patch(lab, "sessions", {"spec": {"engine": "redis"}}).allowed, "the engine rule")


def _freeze_the_whole_spec(lab: Lab) -> None:
    """Put self == oldSelf on spec rather than on spec.engine: the engine is frozen, and so is the size."""
    c = lab.support("memorystore_crd")
    _add_rule(lab, "self == oldSelf")
    c.settle(lab, lambda: not c.try_patch(lab, "sessions", {"spec": {"sizeGi": 2}}).allowed, "the rule on spec")


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "a rule on the engine's value, without oldSelf": _judge_the_value_not_the_change,
    "self == oldSelf on the whole spec, not on the engine": _freeze_the_whole_spec,
}
