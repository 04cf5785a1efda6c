"""Exercise: let the server controller's ServiceAccount run Jobs in dc1, and nothing more.

The check asks the real API server's authorizer, impersonating the ServiceAccount
(`kubectl auth can-i --as=...`), which is what the controller's own requests will meet.
"""

from __future__ import annotations

from krmcourse import CheckFailed, Lab

USER = "system:serviceaccount:krm-system:server-controller"
NEEDED = [
    ("create", "jobs.batch", "dc1"),
    ("get", "jobs.batch", "dc1"),
    ("list", "jobs.batch", "dc1"),
    ("watch", "jobs.batch", "dc1"),
]
TOO_MUCH = [
    (
        "delete",
        "jobs.batch",
        "dc1",
        "It may delete Jobs, but the garbage collector removes them with their Server.",
    ),
    ("create", "jobs.batch", "default", "It may create Jobs outside dc1, where it has no Servers."),
    ("create", "pods", "dc1", "It may create Pods directly; the Job controller does that."),
    ("get", "secrets", "dc1", "It may read Secrets, which it never needs."),
    ("update", "servers.metal.krmcourse.dev", "dc1", "It may change Server specs; it only writes status."),
]


def can(lab: Lab, verb: str, resource: str, namespace: str) -> bool:
    out = lab.kubectl("auth", "can-i", verb, resource, "-n", namespace, f"--as={USER}", check=False)
    return out.strip().split()[0] == "yes" if out.strip() else False


def check(lab: Lab) -> None:
    """Fail unless the four verbs the controller uses on Jobs in dc1 are allowed, and a few others are not."""
    missing = [verb for verb, resource, ns in NEEDED if not can(lab, verb, resource, ns)]
    if missing:
        raise CheckFailed(f"The server-controller ServiceAccount may not {', '.join(missing)} Jobs in dc1.")
    for verb, resource, ns, hint in TOO_MUCH:
        if can(lab, verb, resource, ns):
            raise CheckFailed(f"Too much: {hint}")


def solve(lab: Lab) -> None:
    """Add one rule for Jobs to the controller's Role in dc1."""
    role = lab.get("role", "server-controller", namespace="dc1")
    assert role is not None, "the server-controller Role is missing; bring the lab up first"
    rule = {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "get", "list", "watch"]}
    if rule not in role["rules"]:
        role["rules"].append(rule)
    for field in ("managedFields", "resourceVersion", "uid", "creationTimestamp", "annotations"):
        role["metadata"].pop(field, None)
    lab.apply(role)
