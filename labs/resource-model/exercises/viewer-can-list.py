"""Exercise: let the ServiceAccount ``model/viewer`` read Plants in ``model``, and do nothing else.

The check asks the API server's own authorizer (``kubectl auth can-i --as``, a SubjectAccessReview),
so it tests the effect of whatever Roles and bindings the learner wrote, not their exact shape.
"""

from __future__ import annotations

from krmcourse import CheckFailed, Lab

WHO = "system:serviceaccount:model:viewer"
PLANTS = "plants.garden.krmcourse.dev"

SOLUTION = """
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: plant-reader, namespace: model}
rules:
  - apiGroups: [garden.krmcourse.dev]
    resources: [plants]
    verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: viewer-reads-plants, namespace: model}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: plant-reader}
subjects:
  - {kind: ServiceAccount, name: viewer, namespace: model}
"""


def can(lab: Lab, verb: str, resource: str, namespace: str) -> bool:
    """Whether the viewer may do ``verb`` on ``resource`` in ``namespace``, as the authorizer decides."""
    answer = lab.kubectl("auth", "can-i", verb, resource, "-n", namespace, f"--as={WHO}", check=False)
    return answer.strip().splitlines()[0].strip() == "yes" if answer.strip() else False


def check(lab: Lab) -> None:
    missing = [verb for verb in ("get", "list", "watch") if not can(lab, verb, PLANTS, "model")]
    if missing:
        raise CheckFailed(f"The viewer may not {', '.join(missing)} plants in the model namespace yet.")
    extra = [
        f"{verb} plants"
        for verb in ("create", "update", "patch", "delete")
        if can(lab, verb, PLANTS, "model")
    ]
    extra += ["list secrets"] if can(lab, "list", "secrets", "model") else []
    extra += ["list plants in the default namespace"] if can(lab, "list", PLANTS, "default") else []
    if extra:
        raise CheckFailed(
            f"The viewer can read plants, but it may also {', '.join(extra)}: more than it needs."
        )


def solve(lab: Lab) -> None:
    lab.apply(SOLUTION)
    lab.wait_until(
        lambda: can(lab, "watch", PLANTS, "model"),
        timeout=20,
        message="the viewer's new rights did not take effect",
    )
