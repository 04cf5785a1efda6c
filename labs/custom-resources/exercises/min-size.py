"""Exercise: make the API server refuse a MemoryStore whose ``sizeGi`` is below 1.

The check sends real dry-run creates: ``sizeGi: 0`` must be refused because of ``spec.sizeGi``, and
``sizeGi: 1`` must still be accepted (a rule that refuses everything is not a solution).
"""

from __future__ import annotations

from collections.abc import Callable

from krmcourse import CheckFailed, Lab


def check(lab: Lab) -> None:
    c = lab.support("memorystore_crd")
    for size in (0, -3):
        verdict = c.try_create(lab, c.memory_store("size-probe", engine="redis", sizeGi=size))
        if verdict.allowed:
            raise CheckFailed(f"A MemoryStore with sizeGi: {size} is still accepted by the API server.")
        if "sizeGi" not in verdict.message:
            raise CheckFailed(
                f"A MemoryStore with sizeGi: {size} is refused, but not because of its size: {verdict.message}"
            )
    verdict = c.try_create(lab, c.memory_store("size-probe", engine="redis", sizeGi=1))
    if not verdict.allowed:
        raise CheckFailed(f"A MemoryStore with sizeGi: 1 is refused too: {verdict.message}")


def solve(lab: Lab) -> None:
    c = lab.support("memorystore_crd")
    c.patch_crd(
        lab,
        c.for_every_version(
            lab, lambda i, _: {"op": "add", "path": c.spec_schema_path(i, "sizeGi") + "/minimum", "value": 1}
        ),
    )
    c.settle(
        lab,
        lambda: not c.try_create(lab, c.memory_store("size-probe", engine="redis", sizeGi=0)).allowed,
        "the minimum of sizeGi",
    )


def _size_rule(lab: Lab, keyword: str, value: int) -> None:
    """Set one schema keyword on sizeGi in every version, as a learner editing the CRD would."""
    c = lab.support("memorystore_crd")
    path = [c.spec_schema_path(i, "sizeGi") + f"/{keyword}" for i, _ in enumerate(c.crd(lab)["spec"]["versions"])]
    c.patch_crd(lab, [{"op": "add", "path": p, "value": value} for p in path])


def _default_instead_of_minimum(lab: Lab) -> None:
    """Give sizeGi a default of 1: it fills in a missing size, and leaves a size of 0 alone."""
    c = lab.support("memorystore_crd")
    _size_rule(lab, "default", 1)
    c.settle(lab, lambda: c.try_create(lab, c.memory_store("size-probe", engine="redis")).allowed,
             "the default of sizeGi")


def _minimum_of_zero(lab: Lab) -> None:
    """A minimum one too low: negative sizes are refused, an empty store is not."""
    c = lab.support("memorystore_crd")
    _size_rule(lab, "minimum", 0)
    c.settle(lab, lambda: not c.try_create(lab, c.memory_store("size-probe", engine="redis", sizeGi=-3)).allowed,
             "the minimum of sizeGi")


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "a default of 1 instead of a minimum": _default_instead_of_minimum,
    "a minimum of 0": _minimum_of_zero,
}
