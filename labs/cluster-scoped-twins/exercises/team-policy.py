"""Exercise: team-a writes its own ImagePolicy so that App team-a/tools is admitted."""

from types import ModuleType

from krmcourse import CheckFailed, Lab

POLICY = """
apiVersion: twins.krmcourse.dev/v1
kind: ImagePolicy
metadata: {name: team-a-registries, namespace: team-a}
spec:
  allowedRegistries: [teams.example.com/team-a]
"""


def _resolution(lab: Lab) -> ModuleType:
    """The controller's own resolution rules (controllers/resolution.py)."""
    return lab.support("controllers.resolution")


def check(lab: Lab) -> None:
    """Resolve tools' policyRef with the controller's own rules against the live objects."""
    app = lab.get("apps.twins.krmcourse.dev", "tools", namespace="team-a")
    if app is None:
        raise CheckFailed("The App team-a/tools is gone; reset the lab to get it back.")
    verdict = _resolution(lab).resolve(app, lambda kind, name, ns: lab.get(kind, name, namespace=ns))
    if not verdict.admitted:
        raise CheckFailed(f"App team-a/tools is not admitted yet: {verdict.reason}: {verdict.message}.")
    if not verdict.policy.startswith("ImagePolicy/"):
        raise CheckFailed("tools should be admitted by a namespaced ImagePolicy that team-a owns.")


def solve(lab: Lab) -> None:
    lab.apply(POLICY)
