"""Exercise: the billing data must survive the deletion of the claim that uses it.

The billing team's claim ``billing/ledger`` asks for more than any pre-provisioned Database holds, so the
binder provisions one for it, named after the claim's uid: a name that differs in every lab cluster, and
that only the cluster knows (the claim's ``spec.databaseName``, or the Database whose ``claimRef`` names the
claim). That Database must have ``reclaimPolicy: Retain``. ``pg-billing``, a Database named for billing that
the claim was too large for, is not it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from krmcourse import CheckFailed, Lab

DATABASES = "databases.claims.krmcourse.dev"
CLAIMS = "databaseclaims.claims.krmcourse.dev"
BINDER_FINALIZER = "claims.krmcourse.dev/database-protection"
NAMESPACE, CLAIM = "billing", "ledger"


def billing_database(lab: Lab) -> dict[str, Any] | None:
    """The Database that holds the billing data: the one the claim names, or whose claimRef names the claim."""
    claim = lab.get(CLAIMS, CLAIM, namespace=NAMESPACE)
    name = ((claim or {}).get("spec") or {}).get("databaseName")
    if name:
        return lab.get(DATABASES, name)
    return next((d for d in lab.objects(DATABASES)
                 if (d["spec"].get("claimRef") or {}).get("namespace") == NAMESPACE
                 and d["spec"]["claimRef"].get("name") == CLAIM), None)


def check(lab: Lab) -> None:
    db = billing_database(lab)
    if db is None:
        if lab.get(CLAIMS, CLAIM, namespace=NAMESPACE) is None:
            raise CheckFailed(f"The claim {NAMESPACE}/{CLAIM} is gone, and no Database remembers it: the billing "
                              "data went with it. 'krmcourse reset claims' brings the claim back.")
        raise CheckFailed(f"The claim {NAMESPACE}/{CLAIM} is not bound to a Database yet: the binder binds it "
                          "(is it running?). Its spec will then name the Database that holds the billing data.")
    policy = db["spec"].get("reclaimPolicy")
    if policy == "Retain":
        return
    decoy = lab.get(DATABASES, "pg-billing")
    aside = (" pg-billing is set to Retain, but it is not the Database this claim is bound to: the binding, "
             "recorded on both sides, says which one is."
             if decoy is not None and decoy["spec"].get("reclaimPolicy") == "Retain" else "")
    held = [f for f in db["metadata"].get("finalizers", []) if f != BINDER_FINALIZER]
    raise CheckFailed(
        f"The Database bound to {NAMESPACE}/{CLAIM} has reclaimPolicy {policy}: the binder deletes it, and the "
        "billing data, when the claim goes." + aside
        + (f" The finalizer {', '.join(held)} would only hold it half-deleted (Terminating) after that, "
           "where no claim can ever bind it again." if held else "")
    )


def solve(lab: Lab) -> None:
    lab.start("binder")  # it binds the claim, provisioning the Database (if the notebook has not started it)
    lab.wait_until(lambda: billing_database(lab), timeout=60,
                   message=f"the binder did not bind {NAMESPACE}/{CLAIM}")
    # The claim names its Database in spec.databaseName (the DATABASE column of kubectl get databaseclaims).
    name = lab.get(CLAIMS, CLAIM, namespace=NAMESPACE)["spec"]["databaseName"]
    lab.kubectl("patch", DATABASES, name, "--type=merge", "-p", '{"spec": {"reclaimPolicy": "Retain"}}')


def _bound(lab: Lab) -> dict[str, Any]:
    lab.start("binder")
    db: dict[str, Any] = lab.wait_until(lambda: billing_database(lab), timeout=60,
                                        message=f"the binder did not bind {NAMESPACE}/{CLAIM}")
    return db


def _retain_pg_billing(lab: Lab) -> None:
    """The answer the page once gave: pg-billing patched to Retain, because its name says billing."""
    _bound(lab)
    lab.kubectl("patch", DATABASES, "pg-billing", "--type=merge", "-p", '{"spec": {"reclaimPolicy": "Retain"}}')


def _use_the_pv_field_name(lab: Lab) -> None:
    """Set PersistentVolume's persistentVolumeReclaimPolicy: the server drops the unknown field with a warning."""
    db = _bound(lab)
    lab.kubectl("patch", DATABASES, db["metadata"]["name"], "--type=merge",
                "-p", '{"spec": {"persistentVolumeReclaimPolicy": "Retain"}}')


def _hold_it_with_a_finalizer(lab: Lab) -> None:
    """Add a finalizer of one's own, as the protection finalizer holds a bound Database."""
    db = _bound(lab)
    finalizers = [*db["metadata"].get("finalizers", []), "billing.krmcourse.dev/keep-data"]
    lab.kubectl("patch", DATABASES, db["metadata"]["name"], "--type=merge",
                "-p", json.dumps({"metadata": {"finalizers": finalizers}}))


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "copied from the page: pg-billing set to Retain": _retain_pg_billing,
    "the PersistentVolume field name": _use_the_pv_field_name,
    "a finalizer of one's own to keep it": _hold_it_with_a_finalizer,
}
