"""Look behind the API: what the server added to an object, where it keeps it, and what it recorded.

These helpers keep the resource-model notebook's cells short. Each one reads something real from
the lab: the stored object, the kube-apiserver's command line, etcd itself, or the audit log.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from krmcourse import Lab


def server_filled(sent: dict[str, Any], stored: dict[str, Any], prefix: str = "") -> list[str]:
    """Dotted paths present in what the server stored but absent from what the client sent.

    ``managedFields`` is reported as one path: its content is bookkeeping, covered later (G5).
    """
    added: list[str] = []
    for key, value in stored.items():
        path = f"{prefix}{key}"
        if key not in sent:
            added.append(path)
        elif isinstance(value, dict) and isinstance(sent[key], dict) and key != "managedFields":
            added += server_filled(sent[key], value, prefix=f"{path}.")
    return added


METADATA = ("name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp", "labels",
            "annotations", "ownerReferences", "finalizers")


def anatomy(sent: dict[str, Any], stored: dict[str, Any]) -> list[dict[str, Any]]:
    """Every part of a resource with its value and who set it: the client's request or the API server."""
    filled = set(server_filled(sent, stored))

    def who(path: str, present: bool) -> str:
        return "API server" if path in filled else ("you" if present else "(not set)")

    group, _, version = stored["apiVersion"].rpartition("/")
    rows = [{"part": "apiVersion: group", "value": group or "(core)", "set by": "you"},
            {"part": "apiVersion: version", "value": version, "set by": "you"},
            {"part": "kind", "value": stored["kind"], "set by": "you"}]
    meta = stored.get("metadata", {})
    for key in METADATA:
        rows.append({"part": f"metadata.{key}", "value": meta.get(key, ""),
                     "set by": who(f"metadata.{key}", key in meta)})
    for key, value in stored.get("spec", {}).items():
        rows.append({"part": f"spec.{key}", "value": value, "set by": who(f"spec.{key}", True)})
    rows.append({"part": "status", "value": stored.get("status", ""),
                 "set by": "a controller, later" if "status" not in stored else who("status", True)})
    return rows


def apiserver_flags(lab: Lab) -> dict[str, str]:
    """The ``--flag=value`` arguments of the lab's kube-apiserver, from wherever its provider runs it."""
    return lab.provider.apiserver_flags(lab.cluster)


def storage_key(prefix: str, group: str, resource: str, namespace: str, name: str) -> str:
    """The etcd key the API server uses for one namespaced object (core kinds have no group part)."""
    parts = (
        [prefix.rstrip("/"), group, resource, namespace, name]
        if group
        else [prefix.rstrip("/"), resource, namespace, name]
    )
    return "/".join(parts)


@dataclass(frozen=True)
class EtcdEntry:
    key: str
    mod_revision: int
    value: bytes

    def json(self) -> dict[str, Any]:
        """Custom resources are stored as JSON (built-in kinds as protobuf, which this cannot read)."""
        return json.loads(self.value)


def etcd_get(lab: Lab, key: str) -> EtcdEntry | None:
    """Read one key straight from the lab's etcd through etcd's HTTP gateway, bypassing the API server."""
    kvs = lab.provider.etcd_range(lab.cluster, key)
    if not kvs:
        return None
    kv = kvs[0]
    return EtcdEntry(
        base64.b64decode(kv["key"]).decode(), int(kv["mod_revision"]), base64.b64decode(kv["value"])
    )


def audit_records(
    path: Path | None, *, username: str | None = None, code: int | None = None, resource: str | None = None
) -> list[dict[str, Any]]:
    """Audit events (one JSON object per line) that match every filter given, oldest first."""
    if path is None or not Path(path).is_file():
        return []
    found = []
    with open(path) as fh:
        for line in fh:
            try:
                event = json.loads(line)
            except ValueError:
                continue  # the writer may be half-way through the last line
            if username is not None and event.get("user", {}).get("username") != username:
                continue
            if code is not None and event.get("responseStatus", {}).get("code") != code:
                continue
            if resource is not None and event.get("objectRef", {}).get("resource") != resource:
                continue
            found.append(event)
    return found


def audit_summary(event: dict[str, Any]) -> dict[str, Any]:
    """The fields of an audit event that answer "who did what to which object, and was it allowed"."""
    ref = event.get("objectRef", {})
    annotations = event.get("annotations", {})
    return {
        "user": event.get("user", {}).get("username"),
        "verb": event.get("verb"),
        "resource": ".".join(p for p in (ref.get("resource"), ref.get("apiGroup")) if p),
        "namespace": ref.get("namespace"),
        "code": event.get("responseStatus", {}).get("code"),
        "decision": annotations.get("authorization.k8s.io/decision"),
        "userAgent": event.get("userAgent"),
        "time": event.get("stageTimestamp"),
    }


def ownership_rows(
    lab: Lab,
    namespace: str,
    kinds: tuple[str, ...] = ("deployments", "replicasets", "pods"),
) -> list[dict[str, Any]]:
    """Every object of ``kinds`` in a namespace with its owner (kind/name) and whether that owner controls it."""
    rows = []
    for kind in kinds:
        for item in lab.objects(kind, namespace):
            meta = item["metadata"]
            refs = meta.get("ownerReferences") or [{}]
            for ref in refs:
                rows.append(
                    {
                        "kind": item["kind"],
                        "name": meta["name"],
                        "owner": f"{ref['kind']}/{ref['name']}" if ref else "-",
                        "controller": bool(ref.get("controller")),
                        "generation": meta.get("generation"),
                        "observedGeneration": item.get("status", {}).get("observedGeneration"),
                    }
                )
    return rows
