"""Exercise: team-a writes its own ImagePolicy so that App team-a/tools is admitted.

The exercise's first cell ships a new release of tools (``twins.new_tools_release``): its image and the name of
the ImagePolicy it refers to are drawn per lab cluster, so only the App (and the controller's verdict on it)
says what the policy must be called and what it must allow. The check resolves tools' policyRef with the
controller's own rules against the live objects, then asks those rules whether the policy that admits tools
would also admit another team's image.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from types import ModuleType

from krmcourse import CheckFailed, Lab

#: An image of another team, which team-a's own policy has no business allowing.
OTHER_TEAM_IMAGE = "teams.example.com/team-b/tools:1.4"
APPS = "apps.twins.krmcourse.dev"


def _resolution(lab: Lab) -> ModuleType:
    """The controller's own resolution rules (controllers/resolution.py)."""
    return lab.support("controllers.resolution")


def _policy(name: str, registries: list[str], kind: str = "ImagePolicy") -> str:
    meta = {"name": name, "namespace": "team-a"} if kind == "ImagePolicy" else {"name": name}
    return json.dumps({"apiVersion": "twins.krmcourse.dev/v1", "kind": kind, "metadata": meta,
                       "spec": {"allowedRegistries": registries}})


def check(lab: Lab) -> None:
    """Resolve tools' policyRef with the controller's own rules against the live objects."""
    rules = _resolution(lab)
    app = lab.get(APPS, "tools", namespace="team-a")
    if app is None:
        raise CheckFailed("The App team-a/tools is gone; reset the lab to get it back.")
    if lab.support("twins").RELEASE not in (app["metadata"].get("annotations") or {}):
        raise CheckFailed("team-a has not shipped the new release of tools yet: the exercise's first cell has "
                          "not run since the lab started.")
    verdict = rules.resolve(app, lambda kind, name, ns: lab.get(kind, name, namespace=ns))
    if not verdict.admitted:
        name = app["spec"].get("policyRef", {}).get("name")
        twin = lab.get("clusterimagepolicies.twins.krmcourse.dev", name) if name else None
        raise CheckFailed(
            f"App team-a/tools is not admitted yet: {verdict.reason}: {verdict.message}."
            + (" A ClusterImagePolicy of that name exists, but tools' policyRef asks for the namespaced kind, "
               "and the rules never fall back from one twin to the other."
               if verdict.reason == "PolicyNotFound" and twin is not None else "")
            + (" tools' spec says which policy it names and which image it runs."
               if verdict.reason == "PolicyNotFound" and twin is None else "")
        )
    if not verdict.policy.startswith("ImagePolicy/"):
        raise CheckFailed("tools should be admitted by a namespaced ImagePolicy that team-a owns.")
    policy = lab.get("imagepolicies.twins.krmcourse.dev", verdict.policy.split("/", 1)[1], namespace="team-a")
    registries = (policy or {}).get("spec", {}).get("allowedRegistries", [])
    if rules.image_allowed(OTHER_TEAM_IMAGE, registries):
        raise CheckFailed(
            f"{verdict.policy} in team-a allows {registries}, which admits other teams' images too "
            f"(such as {OTHER_TEAM_IMAGE}): a team's own policy should allow what that team needs."
        )


def solve(lab: Lab) -> None:
    lab.support("twins").new_tools_release(lab)
    # The App names the policy it wants (policyRef) and the image it runs: allow that image's team path only.
    tools = lab.get(APPS, "tools", namespace="team-a")["spec"]
    team_path = tools["image"].rsplit("/", 1)[0]  # teams.example.com/team-a
    lab.kubectl_as("dev", "team-a", "apply", "-f", "-", input=_policy(tools["policyRef"]["name"], [team_path]))


def _copied_from_the_page(lab: Lab) -> None:
    """The policy the page once gave, word for word: team-a-registries, allowing teams.example.com/team-a."""
    lab.support("twins").new_tools_release(lab)
    out = lab.kubectl_as("dev", "team-a", "apply", "-f", "-",
                         input=_policy("team-a-registries", ["teams.example.com/team-a"]))
    assert "team-a-registries" in out, out


def _write_the_cluster_twin(lab: Lab) -> None:
    """Create the policy tools names as a ClusterImagePolicy (as the admin, since team-a/dev may not)."""
    lab.support("twins").new_tools_release(lab)
    name = lab.get(APPS, "tools", namespace="team-a")["spec"]["policyRef"]["name"]
    lab.kubectl("apply", "-f", "-", input=_policy(name, ["teams.example.com/team-a"], kind="ClusterImagePolicy"))


def _allow_the_whole_registry(lab: Lab) -> None:
    """As team-a/dev, allow everything from the registry host, not only team-a's path in it."""
    lab.support("twins").new_tools_release(lab)
    name = lab.get(APPS, "tools", namespace="team-a")["spec"]["policyRef"]["name"]
    out = lab.kubectl_as("dev", "team-a", "apply", "-f", "-", input=_policy(name, ["teams.example.com"]))
    assert name in out, out


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "copied from the page: ImagePolicy team-a-registries": _copied_from_the_page,
    "a ClusterImagePolicy of that name": _write_the_cluster_twin,
    "allow the whole registry host": _allow_the_whole_registry,
}
