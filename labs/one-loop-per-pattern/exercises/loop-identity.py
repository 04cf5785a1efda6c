"""Exercise: give the governor loop an identity of its own, with only what that loop needs.

The check asks the API server's authorizer (``kubectl auth can-i --as``, a SubjectAccessReview)
what the ServiceAccount ops/governor-loop may do in the separate namespace: everything the
governor loop does, and nothing the composite loop does. It asks the same about the tangled
namespace, where the governor loop has no work: a grant that reaches every namespace is too wide.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from krmcourse import CheckFailed, Lab

SUBJECT = "system:serviceaccount:ops:governor-loop"
ELSEWHERE = "tangled"  # another namespace the operator works in, but not this loop's
NEEDED = [
    ("get", "deployments", "scale"),
    ("patch", "deployments", "scale"),
    ("get", "configmaps", ""),
    ("list", "queueworkers.ops.krmcourse.dev", ""),
    ("patch", "queueworkers.ops.krmcourse.dev", "status"),
]
FORBIDDEN = [
    ("create", "deployments", ""),
    ("patch", "deployments", ""),
    ("delete", "deployments", ""),
    ("patch", "configmaps", ""),
    ("patch", "queueworkers.ops.krmcourse.dev", ""),
]


def _can(lab: Lab, verb: str, resource: str, subresource: str, namespace: str = "separate") -> bool:
    args = ["auth", "can-i", verb, resource, "-n", namespace, f"--as={SUBJECT}"]
    if subresource:
        args.append(f"--subresource={subresource}")
    return lab.kubectl(*args, check=False).strip() == "yes"


def _describe(verb: str, resource: str, subresource: str) -> str:
    return f"{verb} {resource}{'/' + subresource if subresource else ''}"


def check(lab: Lab) -> None:
    if lab.get("serviceaccount", "governor-loop", namespace="ops") is None:
        raise CheckFailed("The ServiceAccount governor-loop in namespace ops is gone.")
    missing = [_describe(*need) for need in NEEDED if not _can(lab, *need)]
    if missing:
        raise CheckFailed(f"ops/governor-loop may not yet, in namespace separate: {', '.join(missing)}.")
    extra = [_describe(*deny) for deny in FORBIDDEN if _can(lab, *deny)]
    if extra:
        raise CheckFailed(
            f"ops/governor-loop may also {', '.join(extra)} in separate: more than the governor loop needs."
        )
    beyond = [_describe(*need) for need in NEEDED if _can(lab, *need, namespace=ELSEWHERE)]
    if beyond:
        raise CheckFailed(
            f"ops/governor-loop may also {', '.join(beyond)} in the namespace {ELSEWHERE}, where it has no "
            "work: its rights reach beyond separate."
        )


def _cluster_bindings(lab: Lab) -> list[str]:
    """ClusterRoleBindings that name ops/governor-loop: grants that reach every namespace."""
    loop = ("ServiceAccount", "ops", "governor-loop")
    bindings = json.loads(lab.kubectl("get", "clusterrolebindings", "-o", "json"))["items"]
    return [b["metadata"]["name"] for b in bindings
            if loop in [(s.get("kind"), s.get("namespace"), s.get("name")) for s in b.get("subjects") or []]]


def solve(lab: Lab) -> None:
    for name in _cluster_bindings(lab):  # left from an earlier try: this loop's rights stay in separate
        lab.delete("clusterrolebinding", name)
    lab.apply(lab.path / "exercises" / "loop-identity.solution.yaml")


def _solution(lab: Lab) -> str:
    """The YAML of the reference solution, which each wrong attempt below edits."""
    return (lab.path / "exercises" / "loop-identity.solution.yaml").read_text()


def _grant_it_cluster_wide(lab: Lab) -> None:
    """The right rules, but as a ClusterRole with a ClusterRoleBinding: every namespace, not just separate."""
    lab.apply(_solution(lab).replace("kind: RoleBinding", "kind: ClusterRoleBinding")
              .replace("kind: Role", "kind: ClusterRole").replace("  namespace: separate\n", ""))


def _patch_deployments_instead_of_their_scale(lab: Lab) -> None:
    """Let it patch Deployments themselves, since scaling changes spec.replicas, instead of the scale subresource."""
    lab.apply(_solution(lab).replace("resources: [deployments/scale]", "resources: [deployments]"))


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "the right rules as a ClusterRole bound cluster-wide": _grant_it_cluster_wide,
    "patch Deployments rather than deployments/scale": _patch_deployments_instead_of_their_scale,
}
