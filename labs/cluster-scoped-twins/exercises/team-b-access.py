"""Exercise: team-b's ServiceAccount may write ImagePolicies and Apps in team-b, and nothing more."""

from krmcourse import CheckFailed, Lab

BINDING = """
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: team-editor, namespace: team-b}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: twins-team-editor}
subjects:
- {kind: ServiceAccount, name: dev, namespace: team-b}
"""

SA = "system:serviceaccount:team-b:dev"

MUST = [
    ("create", "imagepolicies.twins.krmcourse.dev", "team-b"),
    ("create", "apps.twins.krmcourse.dev", "team-b"),
]
MUST_NOT = [
    ("create", "clusterimagepolicies.twins.krmcourse.dev", None),
    ("create", "imagepolicies.twins.krmcourse.dev", "team-a"),
    ("create", "rolebindings.rbac.authorization.k8s.io", "team-b"),
]


def _allowed(lab: Lab, verb: str, resource: str, namespace: str | None) -> bool:
    scope = ["-n", namespace] if namespace else []
    out = lab.kubectl("auth", "can-i", verb, resource, *scope, f"--as={SA}", check=False)
    return out.strip() == "yes"


def check(lab: Lab) -> None:
    """Ask the API server's authorizer (SubjectAccessReview) about team-b/dev."""
    for verb, resource, namespace in MUST:
        if not _allowed(lab, verb, resource, namespace):
            raise CheckFailed(f"team-b/dev still cannot {verb} {resource.split('.')[0]} in {namespace}.")
    for verb, resource, namespace in MUST_NOT:
        if _allowed(lab, verb, resource, namespace):
            where = f"in {namespace}" if namespace else "at cluster scope"
            raise CheckFailed(
                f"team-b/dev may {verb} {resource.split('.')[0]} {where}: that is more than it needs."
            )


def solve(lab: Lab) -> None:
    lab.apply(BINDING)
