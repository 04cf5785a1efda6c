"""Exercise: in shop-live, a Cache 'carts' on class premium that overrides only the eviction policy."""

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
        raise CheckFailed(f"carts uses class {spec.get('className') or '(the default)'}, not premium.")
    if spec.get("evictionPolicy") != "allkeys-lru":
        raise CheckFailed("carts does not override the eviction policy with allkeys-lru.")
    pinned = [f for f in ("memoryMiB", "replicas") if f in spec]
    if pinned:
        raise CheckFailed(
            f"carts pins {pinned} itself, so it will not follow the class when the class changes."
        )


def solve(lab: Lab) -> None:
    lab.apply(CARTS)
