"""Notebook helpers for the references lab: read finalizers and reference conditions."""

from __future__ import annotations

from typing import Any

from krmcourse import Lab


def meta(lab: Lab, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
    """An object's metadata ({} when it does not exist)."""
    return (lab.get(kind, name, namespace=namespace) or {}).get("metadata", {})


def protection(lab: Lab, kind: str, name: str, namespace: str | None = None) -> str:
    """One line: the object's finalizers and whether its deletion has been requested."""
    m = meta(lab, kind, name, namespace)
    if not m:
        return f"{kind}/{name}: gone"
    state = f"Terminating since {m['deletionTimestamp']}" if m.get("deletionTimestamp") else "live"
    return f"{kind}/{name}: {state}, finalizers={m.get('finalizers', [])}"


def node_of(lab: Lab, pod: str, namespace: str) -> str:
    """The node a Pod is scheduled to ("" while it waits for the scheduler, or when it does not exist)."""
    return (lab.get("pod", pod, namespace=namespace) or {}).get("spec", {}).get("nodeName", "")


def resolved(lab: Lab, website: str, namespace: str = "web") -> dict[str, Any]:
    """The Website's AssetStoreResolved condition ({} before the controller has judged it)."""
    body = lab.get("websites.refs.krmcourse.dev", website, namespace=namespace) or {}
    return next(
        (c for c in body.get("status", {}).get("conditions", []) if c["type"] == "AssetStoreResolved"), {}
    )
