"""Notebook helpers for the claims lab: read a binding from both sides, and the Bound condition."""

from __future__ import annotations

from krmcourse import Lab


def binding(lab: Lab, namespace: str, claim: str) -> tuple[str, str]:
    """The binding as both sides record it: (claim.spec.databaseName, 'ns/name' from Database.spec.claimRef)."""
    body = lab.get("databaseclaims.claims.krmcourse.dev", claim, namespace=namespace) or {}
    name = body.get("spec", {}).get("databaseName", "")
    db = lab.get("databases.claims.krmcourse.dev", name) if name else None
    ref = (db or {}).get("spec", {}).get("claimRef") or {}
    uid_ok = ref.get("uid") == body.get("metadata", {}).get("uid")
    return name, f"{ref.get('namespace')}/{ref.get('name')}" if uid_ok else ""


def bound_reason(lab: Lab, kind: str, name: str, namespace: str | None = None) -> str:
    """The reason of a Database's or DatabaseClaim's Bound condition ('' before the binder wrote one).

    Database: Available, Bound or Released. DatabaseClaim: Pending, Bound or Lost.
    """
    body = lab.get(f"{kind}.claims.krmcourse.dev", name, namespace=namespace) or {}
    conds = [c for c in body.get("status", {}).get("conditions", []) if c.get("type") == "Bound"]
    return conds[0].get("reason", "") if conds else ""
