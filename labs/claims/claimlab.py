"""Notebook helpers for the claims lab: read a binding from both sides."""

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


def phase(lab: Lab, kind: str, name: str, namespace: str | None = None) -> str:
    """status.phase of a Database or DatabaseClaim ('' when missing)."""
    body = lab.get(f"{kind}.claims.krmcourse.dev", name, namespace=namespace) or {}
    return body.get("status", {}).get("phase", "")
