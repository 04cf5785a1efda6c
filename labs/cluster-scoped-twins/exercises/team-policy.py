"""Exercise: team-a writes its own ImagePolicy so that App team-a/tools is admitted.

The check resolves tools' policyRef with the controller's own rules against the live objects, then asks
those rules whether the policy that admits tools would also admit another team's image.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

from krmcourse import CheckFailed, Lab

POLICY = """
apiVersion: twins.krmcourse.dev/v1
kind: ImagePolicy
metadata: {name: team-a-registries, namespace: team-a}
spec:
  allowedRegistries: [teams.example.com/team-a]
"""

#: An image of another team, which team-a's own policy has no business allowing.
OTHER_TEAM_IMAGE = "teams.example.com/team-b/tools:1.4"


def _resolution(lab: Lab) -> ModuleType:
    """The controller's own resolution rules (controllers/resolution.py)."""
    return lab.support("controllers.resolution")


def check(lab: Lab) -> None:
    """Resolve tools' policyRef with the controller's own rules against the live objects."""
    rules = _resolution(lab)
    app = lab.get("apps.twins.krmcourse.dev", "tools", namespace="team-a")
    if app is None:
        raise CheckFailed("The App team-a/tools is gone; reset the lab to get it back.")
    verdict = rules.resolve(app, lambda kind, name, ns: lab.get(kind, name, namespace=ns))
    if not verdict.admitted:
        name = app["spec"].get("policyRef", {}).get("name")
        twin = lab.get("clusterimagepolicies.twins.krmcourse.dev", name) if name else None
        raise CheckFailed(
            f"App team-a/tools is not admitted yet: {verdict.reason}: {verdict.message}."
            + (" A ClusterImagePolicy of that name exists, but tools' policyRef asks for the namespaced kind, "
               "and the rules never fall back from one twin to the other."
               if verdict.reason == "PolicyNotFound" and twin is not None else "")
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
    lab.apply(POLICY)


def _write_the_cluster_twin(lab: Lab) -> None:
    """Create the policy as a ClusterImagePolicy of that name (as the admin, since team-a/dev may not)."""
    lab.apply(POLICY.replace("kind: ImagePolicy", "kind: ClusterImagePolicy").replace(", namespace: team-a", ""))


def _allow_the_whole_registry(lab: Lab) -> None:
    """As team-a/dev, allow everything from the registry host, not only team-a's path in it."""
    out = lab.kubectl_as("dev", "team-a", "apply", "-f", "-",
                         input=POLICY.replace("teams.example.com/team-a", "teams.example.com"))
    assert "team-a-registries" in out, out


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "a ClusterImagePolicy of that name": _write_the_cluster_twin,
    "allow the whole registry host": _allow_the_whole_registry,
}
