"""Reference binding controller for the claims lab (Database <- DatabaseClaim).

What it does on every pass, for every object (level-triggered, so a restart at any point is safe):
  * Databases carry a protection finalizer. A Database being deleted keeps it while a live claim is
    bound to it, so a bound Database never disappears under its claim (like PV protection).
  * A Database's Bound condition follows from its claimRef: no claimRef -> False/Available, live claim
    -> True/Bound, claim gone -> False/Released (the reasons are PV's phase words). A Released
    Database with reclaimPolicy Delete is deleted; Retain keeps it (and its data) until an admin
    clears claimRef, which makes it Available again: recycling.
  * A claim's Bound condition is True/Bound once its Database names it, False/Pending before, and
    False/Lost if its Database no longer does.
  * An unbound claim gets the smallest Available Database that fits; if none fits, a new Database is
    provisioned for it (reclaimPolicy Delete, since nobody else asked for it).
  * The binding is written in both directions, cluster-scoped side first (Database.spec.claimRef with
    the claim's uid, guarded by resourceVersion so two claims can never win the same Database), then
    DatabaseClaim.spec.databaseName. A crash between the two writes is repaired on the next pass,
    because the claim finds the Database that already names its uid.
"""

from __future__ import annotations

from typing import Any

import kr8s
from kr8s.objects import APIObject, new_class

from krmcourse.conditions import condition, merge_conditions, same_status
from krmcourse.passloop import log, objects, put_status, raw, run

DATABASES = "databases.claims.krmcourse.dev"
CLAIMS = "databaseclaims.claims.krmcourse.dev"
FINALIZER = "claims.krmcourse.dev/database-protection"
Database = new_class(
    "Database", "claims.krmcourse.dev/v1", namespaced=False, plural="databases", asyncio=False
)


def claim_key(ref: dict[str, Any]) -> tuple[str, str]:
    return ref.get("namespace", ""), ref.get("name", "")


def bound_claim(db: dict[str, Any], claims: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any] | None:
    """The live claim this Database is bound to: same namespace/name and, crucially, the same uid."""
    ref = db["spec"].get("claimRef")
    if not ref or not ref.get("uid"):
        return None
    claim = claims.get(claim_key(ref))
    return claim if claim and claim["metadata"]["uid"] == ref["uid"] else None


def database_phase(db: dict[str, Any], claims: dict[tuple[str, str], dict[str, Any]]) -> str:
    """PV's phase word for this Database (Available, Bound or Released): the reason of its Bound condition."""
    ref = db["spec"].get("claimRef")
    if not ref or not ref.get("uid"):
        return "Available"
    return "Bound" if bound_claim(db, claims) else "Released"


def fits(db: dict[str, Any], claim: dict[str, Any]) -> bool:
    """Available, not being deleted, same engine, big enough; an admin may pre-bind by claimRef without uid."""
    ref = db["spec"].get("claimRef")
    if db["metadata"].get("deletionTimestamp"):
        return False
    if ref and (ref.get("uid") or claim_key(ref) != claim_key(claim["metadata"])):
        return False
    return (
        db["spec"]["engine"] == claim["spec"]["engine"] and db["spec"]["sizeGiB"] >= claim["spec"]["sizeGiB"]
    )


def reconcile_database(obj: APIObject, claims: dict[tuple[str, str], dict[str, Any]]) -> None:
    db = raw(obj)
    meta = db["metadata"]
    finalizers = meta.get("finalizers", [])
    if meta.get("deletionTimestamp"):
        if FINALIZER in finalizers and bound_claim(db, claims) is None:
            rest = [f for f in finalizers if f != FINALIZER]
            obj.patch({"metadata": {"finalizers": rest, "resourceVersion": meta["resourceVersion"]}})
            log.info("Database %s is no longer bound: protection finalizer removed", obj.name)
        return
    if FINALIZER not in finalizers:
        obj.patch(
            {"metadata": {"finalizers": [*finalizers, FINALIZER], "resourceVersion": meta["resourceVersion"]}}
        )
    reason = database_phase(db, claims)
    ref = db["spec"].get("claimRef") or {}
    claim = f"{ref['namespace']}/{ref['name']}" if ref.get("uid") else ""
    message = {
        "Available": "no claim is bound; a claim that fits may bind it",
        "Bound": f"bound to claim {claim}",
        "Released": f"its claim {claim} is gone; reclaimPolicy decides what happens next",
    }[reason]
    set_bound(obj, db, reason == "Bound", reason, message, claim=claim)
    if reason == "Released" and db["spec"].get("reclaimPolicy") == "Delete":
        obj.delete()
        log.info("Database %s released with reclaimPolicy Delete: deleted", obj.name)


def set_bound(obj: APIObject, body: dict[str, Any], ok: bool, reason: str, message: str, **fields: str) -> None:
    """Write the Bound condition (and any extra status fields), only when something changed."""
    old = body.get("status") or {}
    cond = condition("Bound", ok, reason, message, body["metadata"].get("generation"))
    new = {**fields, "conditions": merge_conditions(old.get("conditions", []), [cond])}
    if not same_status(old, new):
        put_status(obj, new)
        where = f"{obj.namespace}/{obj.name}" if obj.namespace else obj.name
        log.info("%s %s is %s %s", obj.kind, where, reason, fields.get("claim", ""))


def bind(api: kr8s.Api, claim_obj: APIObject, dbs: dict[str, APIObject]) -> None:
    claim = raw(claim_obj)
    uid = claim["metadata"]["uid"]
    ours = [d for d in dbs.values() if (raw(d)["spec"].get("claimRef") or {}).get("uid") == uid]
    if ours:  # the Database side was written before; finish the claim side
        target = ours[0]
    else:
        candidates = sorted(
            (d for d in dbs.values() if fits(raw(d), claim)), key=lambda d: raw(d)["spec"]["sizeGiB"]
        )
        ref = {"namespace": claim_obj.namespace, "name": claim_obj.name, "uid": uid}
        if candidates:
            target = candidates[0]
            rv = raw(target)["metadata"]["resourceVersion"]
            target.patch({"metadata": {"resourceVersion": rv}, "spec": {"claimRef": ref}})
            log.info("Database %s bound to claim %s/%s", target.name, claim_obj.namespace, claim_obj.name)
        else:
            spec = {
                "engine": claim["spec"]["engine"],
                "sizeGiB": claim["spec"]["sizeGiB"],
                "reclaimPolicy": "Delete",
                "claimRef": ref,
            }
            body = {
                "apiVersion": "claims.krmcourse.dev/v1",
                "kind": "Database",
                "metadata": {"name": f"db-{uid}", "labels": {"claims.krmcourse.dev/provisioned": "true"}},
                "spec": spec,
            }
            target = Database(body, api=api)
            target.create()
            log.info(
                "Database %s provisioned for claim %s/%s", target.name, claim_obj.namespace, claim_obj.name
            )
        dbs[target.name] = target
    claim_obj.patch({"spec": {"databaseName": target.name}})


def reconcile_claim(api: kr8s.Api, obj: APIObject, dbs: dict[str, APIObject]) -> None:
    claim = raw(obj)
    if claim["metadata"].get("deletionTimestamp"):
        return
    name = claim["spec"].get("databaseName")
    if not name:
        bind(api, obj, dbs)
        name = raw(obj)["spec"].get("databaseName")
    db = dbs.get(name or "")
    ref = (raw(db)["spec"].get("claimRef") or {}) if db else {}
    claim = raw(obj)  # binding changed its spec, so its generation too
    if ref.get("uid") == claim["metadata"]["uid"]:
        set_bound(obj, claim, True, "Bound", f"bound to Database {name}")
    elif name:
        set_bound(obj, claim, False, "Lost", f"Database {name} no longer names this claim")
    else:
        set_bound(obj, claim, False, "Pending", "waiting for a Database that fits")


def reconcile_all(api: kr8s.Api) -> None:
    dbs = {d.name: d for d in objects(api, DATABASES)}
    claim_objs = list(objects(api, CLAIMS))
    claims = {(c.namespace, c.name): raw(c) for c in claim_objs}
    for claim in claim_objs:
        reconcile_claim(api, claim, dbs)
    claims = {(c.namespace, c.name): raw(c) for c in claim_objs}
    for db in list(dbs.values()):
        reconcile_database(db, claims)


if __name__ == "__main__":
    run("binder", reconcile_all, watch=[DATABASES, CLAIMS])
