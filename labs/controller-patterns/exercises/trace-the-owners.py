"""Exercise: find the ReplicaSet that the Deployment ``web`` controls, by following ownerReferences.

The learner writes its name into the ConfigMap ``demo/answers`` under the key ``replicaset``. The
check compares it with the ReplicaSet whose controller ownerReference points at Deployment ``web``.
"""

from __future__ import annotations

from types import ModuleType

from krmcourse import CheckFailed, Lab


def check(lab: Lab) -> None:
    sup = lab.support("patterns_support")
    cm = lab.get("configmap", "answers", namespace=sup.NAMESPACE)
    given = ((cm or {}).get("data") or {}).get("replicaset")
    if not given:
        raise CheckFailed(f"There is no ConfigMap answers with a key replicaset in {sup.NAMESPACE} yet.")
    actual = sup.current_replicaset(lab)
    if given.strip() != actual:
        rs = lab.get("replicaset", given.strip(), namespace=sup.NAMESPACE)
        where = (
            "no such ReplicaSet exists" if rs is None else "it is not the one the Deployment runs pods with"
        )
        raise CheckFailed(f"{given!r} is not it: {where}.")


def solve(lab: Lab) -> None:
    sup = lab.support("patterns_support")
    lab.wait_until(lambda: _has_rs(sup, lab), timeout=60, message="Deployment web never made a ReplicaSet")
    lab.kubectl(
        "create",
        "configmap",
        "answers",
        "-n",
        sup.NAMESPACE,
        f"--from-literal=replicaset={sup.current_replicaset(lab)}",
    )


def _has_rs(sup: ModuleType, lab: Lab) -> bool:
    try:
        sup.current_replicaset(lab)
    except LookupError:
        return False
    return True
