"""Exercise: make the API server refuse a Cache whose ``sizeGi`` is below 1.

The check sends real dry-run creates: ``sizeGi: 0`` must be refused because of ``spec.sizeGi``, and
``sizeGi: 1`` must still be accepted (a rule that refuses everything is not a solution).
"""

from __future__ import annotations

from krmcourse import CheckFailed, Lab


def check(lab: Lab) -> None:
    c = lab.support("cache_crd")
    for size in (0, -3):
        verdict = c.try_create(lab, c.cache("size-probe", engine="redis", sizeGi=size))
        if verdict.allowed:
            raise CheckFailed(f"A Cache with sizeGi: {size} is still accepted by the API server.")
        if "sizeGi" not in verdict.message:
            raise CheckFailed(
                f"A Cache with sizeGi: {size} is refused, but not because of its size: {verdict.message}"
            )
    verdict = c.try_create(lab, c.cache("size-probe", engine="redis", sizeGi=1))
    if not verdict.allowed:
        raise CheckFailed(f"A Cache with sizeGi: 1 is refused too: {verdict.message}")


def solve(lab: Lab) -> None:
    c = lab.support("cache_crd")
    c.patch_crd(
        lab,
        c.for_every_version(
            lab, lambda i, _: {"op": "add", "path": c.spec_schema_path(i, "sizeGi") + "/minimum", "value": 1}
        ),
    )
    c.settle(
        lab,
        lambda: not c.try_create(lab, c.cache("size-probe", engine="redis", sizeGi=0)).allowed,
        "the minimum of sizeGi",
    )
