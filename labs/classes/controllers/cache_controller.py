"""The live way: a controller that consults each Cache's class on every pass.

It writes what a Cache would really get into status: the class in use, the effective settings, and
where each came from (spec or class). Edit a class, or move the default mark, and the next pass
carries the change to every Cache that relies on the class.
"""

from __future__ import annotations

import kr8s
from classes import class_for, effective

from krmcourse.conditions import condition, merge_conditions, same_status
from krmcourse.passloop import log, objects, put_status, raw, run


def reconcile_all(api: kr8s.Api) -> None:
    classes = [raw(c) for c in objects(api, "cacheclasses.classes.krmcourse.dev")]
    for obj in objects(api, "caches.classes.krmcourse.dev"):
        cache = raw(obj)
        cls = class_for(cache, classes)
        values, sources = effective(cache, cls)
        wanted = cache.get("spec", {}).get("className")
        if cls is None:
            reason, message = (
                ("ClassNotFound", f"CacheClass {wanted} does not exist")
                if wanted
                else ("NoDefaultClass", "no class named and no CacheClass is marked as the default")
            )
        else:
            reason, message = "ClassResolved", f"using CacheClass {cls['metadata']['name']}"
        old = cache.get("status", {})
        cond = condition(
            "ClassResolved", cls is not None, reason, message, cache["metadata"].get("generation")
        )
        new = {
            "className": cls["metadata"]["name"] if cls else "",
            "effective": values,
            "sources": sources,
            "conditions": merge_conditions(old.get("conditions", []), [cond]),
        }
        if not same_status(old, new):
            put_status(obj, new)
            log.info("Cache %s/%s uses %s: %s", obj.namespace, obj.name, new["className"] or "-", values)


if __name__ == "__main__":
    run(
        "cache-controller",
        reconcile_all,
        watch=["cacheclasses.classes.krmcourse.dev", "caches.classes.krmcourse.dev"],
    )
