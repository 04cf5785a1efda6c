"""Exercise: once a Cache exists, its engine may not change; everything else still may.

This needs a transition rule, a CEL rule that compares ``self`` with ``oldSelf``. The check sends
dry-run patches to the existing Cache ``sessions``: switching its engine must be refused, resizing it
must be accepted, and creating a new Cache of either engine must still work (transition rules do not
apply to creates).
"""

from __future__ import annotations

from krmcourse import CheckFailed, Lab

RULE = {"rule": "self == oldSelf", "message": "engine is immutable; create a new Cache instead"}


def check(lab: Lab) -> None:
    c = lab.support("cache_crd")
    if lab.get("caches.store.krmcourse.dev", "sessions", namespace=c.NAMESPACE) is None:
        raise CheckFailed(
            "The Cache sessions is missing from the store namespace; reset the lab to get it back."
        )
    switch = c.try_patch(lab, "sessions", {"spec": {"engine": "redis"}})
    if switch.allowed:
        raise CheckFailed(
            "Changing the engine of the existing Cache sessions (memcached) to redis is accepted."
        )
    resize = c.try_patch(lab, "sessions", {"spec": {"sizeGi": 2}})
    if not resize.allowed:
        raise CheckFailed(
            f"Resizing the Cache sessions is refused as well, but only the engine should be "
            f"frozen: {resize.message}"
        )
    for engine in ("redis", "memcached"):
        fresh = c.try_create(lab, c.cache("engine-probe", engine=engine, sizeGi=1))
        if not fresh.allowed:
            raise CheckFailed(f"Creating a new {engine} Cache is refused: {fresh.message}")


def solve(lab: Lab) -> None:
    c = lab.support("cache_crd")
    c.patch_crd(
        lab,
        c.for_every_version(
            lab,
            lambda i, _: {
                "op": "add",
                "path": c.spec_schema_path(i, "engine") + "/x-kubernetes-validations",
                "value": [RULE],
            },
        ),
    )
    c.settle(
        lab,
        lambda: not c.try_patch(lab, "sessions", {"spec": {"engine": "redis"}}).allowed,
        "the transition rule",
    )
