"""Exercise mirror-identity: the fleet controller's own, least-privilege identity in a member cluster (M1).

The controller that manages a fleet holds a credential for every member. If it holds cluster-admin
everywhere, one leaked file opens every cluster. It needs ConfigMaps in namespace fleet, nothing else.
"""

from __future__ import annotations

from krmcourse import CheckFailed, Lab

SA = "system:serviceaccount:fleet:fleet-mirror"
NEEDED = ("get", "list", "watch", "create", "update", "patch", "delete")


def can(lab: Lab, verb: str, resource: str, namespace: str) -> bool:
    answer = lab.kubectl("auth", "can-i", verb, resource, "-n", namespace, f"--as={SA}", check=False)
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


def solve(lab: Lab) -> None:
    lab.apply(lab.path / "exercises" / "mirror-identity.solution.yaml")
