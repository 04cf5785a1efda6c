"""Exercise: refuse pods in the shop namespace whose image tag moves (``:latest`` or no tag at all).

The check probes the real API server with dry-run creates: a pod on ``:latest`` and a pod with no
tag must both be refused by a ValidatingAdmissionPolicy, and a pod on a pinned tag must be admitted.
"""

from __future__ import annotations

from krmcourse import CheckFailed, Lab


def check(lab: Lab) -> None:
    enf = lab.support("enforcer_support")
    for image in ("registry.example/shop/web:latest", "registry.example/shop/web"):
        result = enf.create(lab, enf.pod("tag-probe", "shop", image=image))
        if result.allowed:
            raise CheckFailed(f"A pod running {image} is still admitted in the shop namespace.")
        if "ValidatingAdmissionPolicy" not in result.message:
            raise CheckFailed(
                f"A pod running {image} is refused, but not by a ValidatingAdmissionPolicy: {result.message}"
            )
    pinned = "registry.example/shop/web:1.4"
    result = enf.create(lab, enf.pod("tag-probe", "shop", image=pinned))
    if not result.allowed:
        raise CheckFailed(f"A pod running the pinned image {pinned} is refused too: {result.message}")
    registry_port = "registry.example:5000/shop/web"
    result = enf.create(lab, enf.pod("tag-probe", "shop", image=registry_port))
    if result.allowed:
        raise CheckFailed(
            f"A pod running {registry_port} is admitted: the ':5000' is the registry's port, not a tag."
        )


def solve(lab: Lab) -> None:
    lab.apply(lab.path / "exercises" / "no-latest-tag.solution.yaml")
    lab.wait_until(lambda: lab.solved("no-latest-tag"), timeout=30,
                   message="the no-latest-tag policy did not take effect")
