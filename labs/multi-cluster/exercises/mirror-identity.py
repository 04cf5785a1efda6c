"""Exercise mirror-identity: the fleet controller's own, least-privilege identity in a member cluster (M1).

The controller that manages a fleet holds a credential for every member. If it holds cluster-admin
everywhere, one leaked file opens every cluster. It needs ConfigMaps in namespace fleet, nothing else.

The check asks the member's authorizer (``kubectl auth can-i --as``) what fleet-mirror may do, and
also what the fleet namespace's ``default`` ServiceAccount may do: rights granted to a whole group of
ServiceAccounts reach the mirror too, but they are not its own identity.
"""

from __future__ import annotations

from collections.abc import Callable

from krmcourse import CheckFailed, Lab

SA = "system:serviceaccount:fleet:fleet-mirror"
NEIGHBOUR = "system:serviceaccount:fleet:default"
NEEDED = ("get", "list", "watch", "create", "update", "patch", "delete")


def can(lab: Lab, verb: str, resource: str, namespace: str, who: str = SA) -> bool:
    answer = lab.kubectl("auth", "can-i", verb, resource, "-n", namespace, f"--as={who}", check=False)
    return answer.strip().startswith("yes")


def check(lab: Lab) -> None:
    if lab.get("serviceaccount", "fleet-mirror", namespace="fleet") is None:
        raise CheckFailed("There is no ServiceAccount fleet-mirror in namespace fleet for the controller to be.")
    missing = [verb for verb in NEEDED if not can(lab, verb, "configmaps", "fleet")]
    if missing:
        raise CheckFailed(f"fleet-mirror cannot yet {', '.join(missing)} ConfigMaps in namespace fleet.")
    too_much = [what for what, verb, res, ns in (("read Secrets in fleet", "get", "secrets", "fleet"),
                                                 ("list ConfigMaps in kube-system", "list", "configmaps",
                                                  "kube-system"),
                                                 ("delete namespaces", "delete", "namespaces", "default"))
                if can(lab, verb, res, ns)]
    if too_much:
        raise CheckFailed(f"fleet-mirror can {' and '.join(too_much)}: more than mirroring ConfigMaps needs.")
    if can(lab, "update", "configmaps", "fleet", who=NEIGHBOUR):
        raise CheckFailed(
            "The default ServiceAccount of namespace fleet may update its ConfigMaps as well: the rights "
            "went to a group of ServiceAccounts, so the controller's credential is not the only one that has them."
        )


def solve(lab: Lab) -> None:
    lab.apply(lab.path / "exercises" / "mirror-identity.solution.yaml")


def _solution(lab: Lab) -> str:
    """The reference solution's YAML, for the wrong attempts to start from."""
    return (lab.path / "exercises" / "mirror-identity.solution.yaml").read_text()


def _bind_every_serviceaccount_of_fleet(lab: Lab) -> None:
    """The right Role, bound to the group system:serviceaccounts:fleet instead of the one ServiceAccount."""
    one = "  - kind: ServiceAccount\n    name: fleet-mirror\n    namespace: fleet\n"
    group = "  - kind: Group\n    name: system:serviceaccounts:fleet\n    apiGroup: rbac.authorization.k8s.io\n"
    assert one in _solution(lab)
    lab.apply(_solution(lab).replace(one, group))


def _allow_every_core_resource(lab: Lab) -> None:
    """Bound to fleet-mirror alone, but the Role names every resource of the core group, not just ConfigMaps."""
    lab.apply(_solution(lab).replace("resources: [configmaps]", "resources: ['*']"))


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "bind the Role to every ServiceAccount of fleet": _bind_every_serviceaccount_of_fleet,
    "a Role for every resource in the core group": _allow_every_core_resource,
}
