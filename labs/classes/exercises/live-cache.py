"""Exercise: in shop-live, a Cache 'carts' on class premium that overrides only the eviction policy."""

from __future__ import annotations

from collections.abc import Callable

from krmcourse import CheckFailed, Lab

CARTS = """
apiVersion: classes.krmcourse.dev/v1
kind: Cache
metadata: {name: carts, namespace: shop-live}
spec: {className: premium, evictionPolicy: allkeys-lru}
"""


def check(lab: Lab) -> None:
    carts = lab.get("caches.classes.krmcourse.dev", "carts", namespace="shop-live")
    if carts is None:
        raise CheckFailed("There is no Cache carts in namespace shop-live yet.")
    spec = carts.get("spec", {})
    if spec.get("className") != "premium":
        raise CheckFailed(
            f"carts uses class {spec.get('className') or '(the default)'}, not premium."
            + ("" if spec.get("className") else " A Cache that names no class follows whichever class is "
               "marked default at the time, and that mark can move.")
        )
    if spec.get("evictionPolicy") != "allkeys-lru":
        raise CheckFailed("carts does not override the eviction policy with allkeys-lru.")
    pinned = [f for f in ("memoryMiB", "replicas") if f in spec]
    if pinned:
        raise CheckFailed(
            f"carts pins {pinned} itself, so it will not follow the class when the class changes."
        )


def solve(lab: Lab) -> None:
    lab.apply(CARTS)


def _copy_the_class_values(lab: Lab) -> None:
    """Write premium's memory and replicas into carts as well, to be sure it gets them."""
    lab.apply(CARTS.replace("evictionPolicy: allkeys-lru", "evictionPolicy: allkeys-lru, memoryMiB: 1024, replicas: 3"))


def _rely_on_the_default(lab: Lab) -> None:
    """Leave className out, since premium is the default by the end of the notebook."""
    lab.apply(CARTS.replace("className: premium, ", ""))


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "copy the class's memory and replicas into the spec": _copy_the_class_values,
    "leave the class name to the default": _rely_on_the_default,
}
