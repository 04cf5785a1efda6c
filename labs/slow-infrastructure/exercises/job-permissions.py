"""Exercise: let the server controller's ServiceAccount run Jobs in dc1, and nothing more.

The check asks the real API server's authorizer, impersonating the ServiceAccount
(`kubectl auth can-i --as=...`), which is what the controller's own requests will meet. When the
Jobs verbs are missing, the hint also reads the Role server-controller in dc1 for a rule that names
jobs in another API group than batch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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
        rules = (lab.get("role", "server-controller", namespace="dc1") or {}).get("rules") or []
        groups = {g for r in rules if "jobs" in r.get("resources", []) for g in r.get("apiGroups", [])} - {"batch"}
        astray = (f" Its Role names jobs under apiGroups {', '.join(map(repr, sorted(groups)))}, where there is "
                  "no resource called jobs.") if groups else ""
        raise CheckFailed(f"The server-controller ServiceAccount may not {', '.join(missing)} Jobs in dc1.{astray}")
    for verb, resource, ns, hint in TOO_MUCH:
        if can(lab, verb, resource, ns):
            raise CheckFailed(f"Too much: {hint}")


def _put_jobs_rule(lab: Lab, rule: dict[str, Any]) -> None:
    """Make ``rule`` the one rule about Jobs in the controller's Role in dc1 (replacing an earlier one)."""
    role = lab.get("role", "server-controller", namespace="dc1")
    assert role is not None, "the server-controller Role is missing; bring the lab up first"
    role["rules"] = [r for r in role["rules"] if "jobs" not in r.get("resources", [])] + [rule]
    for field in ("managedFields", "resourceVersion", "uid", "creationTimestamp", "annotations"):
        role["metadata"].pop(field, None)
    lab.apply(role)


def solve(lab: Lab) -> None:
    """Add one rule for Jobs to the controller's Role in dc1."""
    _put_jobs_rule(lab, {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "get", "list", "watch"]})


def _jobs_in_the_core_group(lab: Lab) -> None:
    """The right verbs, with apiGroups [""] copied from a Pod rule: Jobs are not in the core group."""
    _put_jobs_rule(lab, {"apiGroups": [""], "resources": ["jobs"], "verbs": ["create", "get", "list", "watch"]})


def _every_verb_on_jobs(lab: Lab) -> None:
    """The right group, but every verb on Jobs, so nothing the controller might do is refused."""
    _put_jobs_rule(lab, {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["*"]})


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "a Jobs rule in the core API group": _jobs_in_the_core_group,
    "every verb on Jobs": _every_verb_on_jobs,
}
