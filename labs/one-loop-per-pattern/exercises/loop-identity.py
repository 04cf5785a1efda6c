"""Exercise: give the governor loop an identity of its own, with only what that loop needs.

The check asks the API server's authorizer (``kubectl auth can-i --as``, a SubjectAccessReview)
what the ServiceAccount ops/governor-loop may do in the separate namespace: everything the
governor loop does, and nothing the composite loop does.
"""

from __future__ import annotations

from krmcourse import CheckFailed, Lab

SUBJECT = "system:serviceaccount:ops:governor-loop"
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


def _can(lab: Lab, verb: str, resource: str, subresource: str) -> bool:
    args = ["auth", "can-i", verb, resource, "-n", "separate", f"--as={SUBJECT}"]
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


def solve(lab: Lab) -> None:
    lab.apply(lab.path / "exercises" / "loop-identity.solution.yaml")
