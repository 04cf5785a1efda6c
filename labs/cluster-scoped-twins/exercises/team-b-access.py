"""Exercise: team-b's ServiceAccount may write ImagePolicies and Apps in team-b, and nothing more.

The check asks the API server's authorizer: SubjectAccessReviews (kubectl auth can-i) for what team-b/dev
must and must not do, and a SelfSubjectRulesReview, made as team-b/dev, for everything it may do in
team-b, so that a second, broader grant beside the right one does not go unnoticed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

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

MUST: list[tuple[str, str, str | None]] = [
    ("create", "imagepolicies.twins.krmcourse.dev", "team-b"),
    ("create", "apps.twins.krmcourse.dev", "team-b"),
]
MUST_NOT = [
    ("create", "clusterimagepolicies.twins.krmcourse.dev", None),
    ("create", "imagepolicies.twins.krmcourse.dev", "team-a"),
    ("create", "rolebindings.rbac.authorization.k8s.io", "team-b"),
]
#: (API group, resource) that team-b/dev may have rules for in team-b: the twins it works with (the lab
#: lets every team read ClusterImagePolicies), and the reviews every identity may make about itself.
ALLOWED = {
    ("twins.krmcourse.dev", "imagepolicies"),
    ("twins.krmcourse.dev", "apps"),
    ("twins.krmcourse.dev", "clusterimagepolicies"),
    ("authorization.k8s.io", "selfsubjectaccessreviews"),
    ("authorization.k8s.io", "selfsubjectrulesreviews"),
    ("authentication.k8s.io", "selfsubjectreviews"),
}
#: The lab's own grants to team-b/dev, and the one the exercise asks for: (kind, namespace, name, role).
INTENDED = {
    ("ClusterRoleBinding", "", "twins-cluster-policy-reader", "twins-cluster-policy-reader"),
    ("RoleBinding", "team-b", "team-editor", "twins-team-editor"),
}


def _allowed(lab: Lab, verb: str, resource: str, namespace: str | None) -> bool:
    scope = ["-n", namespace] if namespace else []
    out = lab.kubectl("auth", "can-i", verb, resource, *scope, f"--as={SA}", check=False)
    return out.strip() == "yes"


def _beyond_the_twins(lab: Lab) -> list[str]:
    """What team-b/dev may use in team-b outside ALLOWED, as group/resource, from its own rules review."""
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
              "spec": {"namespace": "team-b"}}
    out = lab.kubectl("create", "--validate=false", f"--as={SA}", "-o", "json", "-f", "-", input=json.dumps(review))
    writes: set[str] = set()
    reads: set[str] = set()
    for rule in json.loads(out)["status"].get("resourceRules", []):
        for group in rule.get("apiGroups", []):
            for resource in rule.get("resources", []):
                if (group, resource) not in ALLOWED:
                    read_only = set(rule.get("verbs", [])) <= {"get", "list", "watch"}
                    (reads if read_only else writes).add(f"{group or 'core'}/{resource}")
    return sorted(writes) + sorted(reads - writes)  # the ones it may change first


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
    extra = _beyond_the_twins(lab)
    if extra:
        raise CheckFailed(
            f"team-b/dev may also use {len(extra)} other resource(s) in team-b, such as {', '.join(extra[:5])}: "
            "some binding grants it a broader role than ImagePolicies and Apps need."
        )


def solve(lab: Lab) -> None:
    _revoke_other_grants(lab)  # any broader grant an earlier attempt made: least privilege takes it back
    lab.apply(BINDING)


def _revoke_other_grants(lab: Lab) -> None:
    """Take team-b/dev out of every RoleBinding and ClusterRoleBinding that is not in INTENDED."""
    ours = {"kind": "ServiceAccount", "name": "dev", "namespace": "team-b"}
    for kind in ("RoleBinding", "ClusterRoleBinding"):
        listing = json.loads(lab.kubectl("get", kind.lower() + "s", "-A", "-o", "json"))
        for binding in listing["items"]:
            meta: dict[str, Any] = binding["metadata"]
            key = (kind, meta.get("namespace", ""), meta["name"], binding["roleRef"]["name"])
            subjects = [s for s in binding.get("subjects") or [] if {k: s.get(k) for k in ours} != ours]
            if key in INTENDED or len(subjects) == len(binding.get("subjects") or []):
                continue
            scope = ["-n", meta["namespace"]] if meta.get("namespace") else []
            if subjects:
                lab.kubectl("patch", kind.lower(), meta["name"], *scope, "--type=merge",
                            "-p", json.dumps({"subjects": subjects}))
            else:
                lab.kubectl("delete", kind.lower(), meta["name"], *scope)


def _bind_edit_as_well(lab: Lab) -> None:
    """Bind the built-in edit role in team-b first, then add the twins editor role when that was not enough."""
    lab.apply(BINDING.replace("name: team-editor", "name: team-b-edit").replace("twins-team-editor", "edit"))
    lab.apply(BINDING)


def _bind_cluster_wide(lab: Lab) -> None:
    """Grant the team editor ClusterRole with a ClusterRoleBinding instead of a RoleBinding in team-b."""
    lab.apply(BINDING.replace("kind: RoleBinding", "kind: ClusterRoleBinding")
              .replace("{name: team-editor, namespace: team-b}", "{name: team-b-editor}"))


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "the built-in edit role beside the team editor role": _bind_edit_as_well,
    "a ClusterRoleBinding of the team editor role": _bind_cluster_wide,
}
