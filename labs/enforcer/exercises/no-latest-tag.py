"""Exercise: refuse pods in the shop namespace whose image tag moves (``:latest`` or no tag at all).

The check probes the real API server with dry-run creates: a pod on ``:latest`` and a pod with no
tag must both be refused by a ValidatingAdmissionPolicy, and a pod on a pinned tag must be admitted.
"""

from __future__ import annotations

from collections.abc import Callable

import yaml

from krmcourse import CheckFailed, Lab


def check(lab: Lab) -> None:
    enf = lab.support("enforcer_support")
    moving = {"registry.example/shop/web:latest": "", "registry.example/shop/web": " Without a tag it runs :latest."}
    for image, why in moving.items():
        result = enf.create(lab, enf.pod("tag-probe", "shop", image=image))
        if result.allowed:
            raise CheckFailed(f"A pod running {image} is still admitted in the shop namespace.{why}")
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


def _policy_with_rule(lab: Lab, expression: str, refused_image: str) -> None:
    """The solution's policy and binding with another CEL rule; waits until ``refused_image`` is refused."""
    enf = lab.support("enforcer_support")
    policy, binding = yaml.safe_load_all((lab.path / "exercises" / "no-latest-tag.solution.yaml").read_text())
    policy["spec"]["validations"] = [{"expression": expression, "message": "pin the image tag", "reason": "Invalid"}]
    lab.apply([policy, binding])
    enf.wait_refused(lab, enf.pod("tag-probe", "shop", image=refused_image))


def _refuse_only_latest(lab: Lab) -> None:
    """Refuse ':latest' by name, and forget that an image without a tag moves just the same."""
    _policy_with_rule(lab, "object.spec.containers.all(c, !c.image.endsWith(':latest'))",
                      "registry.example/shop/web:latest")


def _any_colon_is_a_tag(lab: Lab) -> None:
    """Ask for a ':' anywhere in the image, so a registry's port passes for a tag."""
    _policy_with_rule(lab, "object.spec.containers.all(c, c.image.contains(':') && !c.image.endsWith(':latest'))",
                      "registry.example/shop/web")


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "refuse only the ':latest' tag": _refuse_only_latest,
    "take any ':' for a tag": _any_colon_is_a_tag,
}
