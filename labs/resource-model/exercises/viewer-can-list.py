"""Exercise: let the ServiceAccount ``model/viewer`` read Plants in ``model``, and do nothing else.

The check asks the API server's own authorizer (``lab.can_i``, which impersonates the account),
so it tests the effect of whatever Roles and bindings the learner wrote, not their exact shape. It
also asks about ``model/nobody``, another ServiceAccount of the namespace: a grant to a whole group
of identities lets the viewer read plants, but it is not the viewer's own.
"""

from __future__ import annotations

from collections.abc import Callable

from krmcourse import CheckFailed, Lab

WHO = "system:serviceaccount:model:viewer"
BYSTANDER = "system:serviceaccount:model:nobody"
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


def can(lab: Lab, verb: str, resource: str, namespace: str, who: str = WHO) -> bool:
    """Whether ``who`` (the viewer) may do ``verb`` on ``resource`` in ``namespace``, as the authorizer decides."""
    return lab.can_i(who, verb, resource, namespace=namespace)


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
    if can(lab, "list", PLANTS, "model", who=BYSTANDER):
        raise CheckFailed(
            "The ServiceAccount model/nobody may list plants too: the rights were granted to a group "
            "of identities, not to the viewer alone."
        )


def solve(lab: Lab) -> None:
    lab.apply(SOLUTION)
    lab.wait_until(
        lambda: can(lab, "watch", PLANTS, "model"),
        timeout=20,
        message="the viewer's new rights did not take effect",
    )


def _grant_to_every_serviceaccount_of_model(lab: Lab) -> None:
    """The right Role, bound to the group of all ServiceAccounts in model rather than to the viewer."""
    lab.apply(SOLUTION.replace("{kind: ServiceAccount, name: viewer, namespace: model}",
                               "{kind: Group, name: 'system:serviceaccounts:model', "
                               "apiGroup: rbac.authorization.k8s.io}"))


def _grant_every_verb_on_plants(lab: Lab) -> None:
    """Bound to the viewer, but the Role allows every verb on plants: '*' is quicker to type."""
    lab.apply(SOLUTION.replace("verbs: [get, list, watch]", "verbs: ['*']"))


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "bind the Role to every ServiceAccount of model": _grant_to_every_serviceaccount_of_model,
    "a Role with every verb on plants": _grant_every_verb_on_plants,
}
