"""Notebook helpers for the references lab: read finalizers and reference conditions."""

from __future__ import annotations

import json
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


# --------------------------------------------------------------------------- the exercises' scenes, drawn per cluster
_ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"  # no 0/o, 1/l/i: names are read off a screen
BACKUP = "nightly-backup"  # a ConfigMap in db: the backup Pod that start_nightly_backup made
ARCHIVE, MOVED = "archive", "moved"  # a namespace, and a ConfigMap in it: the store that left web


def _token(n: int = 5) -> str:
    import secrets

    return "".join(secrets.choice(_ALPHABET) for _ in range(n))


def mounts(pod: dict[str, Any], claim: str) -> bool:
    return any((v.get("persistentVolumeClaim") or {}).get("claimName") == claim for v in pod["spec"].get("volumes", []))


def claim_users(lab: Lab, claim: str = "data", namespace: str = "db") -> list[str]:
    """The Pods in ``namespace`` that mount ``claim``, by name."""
    return sorted(p["metadata"]["name"] for p in lab.objects("pods", namespace) if mounts(p, claim))


def backup_started(lab: Lab) -> bool:
    return lab.get("configmap", BACKUP, namespace="db") is not None


def start_nightly_backup(lab: Lab) -> None:
    """Start, once per cluster, a second workload that mounts db/data: a Pod whose name is drawn here and
    printed nowhere. Returns once the scheduler has given it a node (from then on it counts as a user)."""
    record = lab.get("configmap", BACKUP, namespace="db")
    if record is None:
        name = f"backup-{_token()}"
        lab.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "db"},
                   "spec": {"containers": [{"name": "dump", "image": "registry.example/pause:3.10"}],
                            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}})
        lab.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": BACKUP, "namespace": "db"},
                   "data": {"pod": name}})
    else:
        name = record["data"]["pod"]
    if lab.get("pod", name, namespace="db") is not None:
        lab.wait_until(lambda: node_of(lab, name, "db"), timeout=60, message="the backup Pod was not scheduled")


def moved_store(lab: Lab) -> dict[str, str]:
    """The store gallery lost: {'name': ..., 'sizeGiB': ...} ({} before :func:`move_gallery_store` ran)."""
    cm = lab.get("configmap", MOVED, namespace=ARCHIVE)
    return dict((cm or {}).get("data") or {})


def move_gallery_store(lab: Lab) -> None:
    """Once per cluster: give gallery its own AssetStore, with a drawn name and size, and move that store to
    the archive namespace by mistake (delete it in web, create it in archive). gallery's reference dangles."""
    import random

    if moved_store(lab):
        return
    name, size = f"images-{_token()}", str(random.SystemRandom().randint(2, 40))
    store = {"apiVersion": "refs.krmcourse.dev/v1", "kind": "AssetStore",
             "metadata": {"name": name, "namespace": ARCHIVE}, "spec": {"sizeGiB": int(size)}}
    lab.apply([store, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": MOVED, "namespace": ARCHIVE},
                       "data": {"name": name, "sizeGiB": size}}])
    lab.kubectl("patch", "websites.refs.krmcourse.dev", "gallery", "-n", "web", "--type=merge",
                "-p", json.dumps({"spec": {"assetStoreRef": {"name": name}}}))


def judged(lab: Lab, website: str, namespace: str = "web") -> bool:
    """Whether the controller's AssetStoreResolved condition is about the Website's current spec."""
    body = lab.get("websites.refs.krmcourse.dev", website, namespace=namespace) or {}
    generation = body.get("metadata", {}).get("generation")
    return generation is not None and resolved(lab, website, namespace).get("observedGeneration") == generation
