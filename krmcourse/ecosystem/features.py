"""Per-kind API features, read from an OpenAPI v3 schema and, when there is one, from the CRD around it.

The same functions serve every source (a schema dump, CRD manifests shipped in a package, or the CRDs a
live API server lists), so that a figure computed on the dataset and one computed on a lab cluster
mean the same thing.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any, cast

Schema = Mapping[str, Any]

#: The fields every Kubernetes object has; a schema that stops at these carries no validation.
ENVELOPE_FIELDS = frozenset({"apiVersion", "kind", "metadata"})
_OBJECT_META_REF = "ObjectMeta"


@dataclass(frozen=True)
class KindFeatures:
    """What one version of one kind declares. ``None`` means "this source cannot tell"."""

    has_validation: bool
    uses_refs: bool
    enum_count: int
    cel_rule_count: int
    spec_bool_paths: tuple[str, ...]
    has_status: bool
    has_conditions: bool | None
    has_phase: bool | None
    printer_columns: int | None = None
    subresource_status: bool | None = None
    subresource_scale: bool | None = None

    def as_row(self) -> dict[str, Any]:
        """A flat dict for a table row (paths joined with ';', counts of booleans added)."""
        row = asdict(self)
        row["spec_bool_count"] = len(self.spec_bool_paths)
        row["spec_bool_paths"] = ";".join(self.spec_bool_paths)
        row["has_enum"] = self.enum_count > 0
        row["has_cel"] = self.cel_rule_count > 0
        return row


def _walk(node: Any, path: str = "") -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Yield (dotted path, schema node) for every schema node, following properties, items and combinators."""
    if not isinstance(node, Mapping):
        return
    yield path, node
    for name, child in (node.get("properties") or {}).items():
        yield from _walk(child, f"{path}.{name}" if path else name)
    items = node.get("items")
    if isinstance(items, Mapping):
        yield from _walk(items, f"{path}[]")
    extra = node.get("additionalProperties")
    if isinstance(extra, Mapping):
        yield from _walk(extra, f"{path}{{}}")
    for key in ("allOf", "anyOf", "oneOf"):
        for child in node.get(key) or []:
            yield from _walk(child, path)


def _refs(schema: Schema) -> list[str]:
    return [node["$ref"] for _, node in _walk(schema) if isinstance(node.get("$ref"), str)]


def _inline(node: Any) -> Mapping[str, Any] | None:
    """The node's own properties, or None when they sit behind a $ref this source does not resolve."""
    if not isinstance(node, Mapping):
        return None
    if "properties" in node:
        return cast("Mapping[str, Any]", node["properties"])
    for child in node.get("allOf") or []:
        if isinstance(child, Mapping) and "$ref" in child:
            return None
    if "$ref" in node:
        return None
    return {}


_STRUCTURE = ("properties", "items", "additionalProperties", "$ref", "allOf", "anyOf", "oneOf", "enum",
              "x-kubernetes-validations")


def _constrains(node: Any) -> bool:
    """Whether a top-level field's schema limits what may be stored in it.

    ``{x-kubernetes-preserve-unknown-fields: true}`` with nothing else accepts anything, so it is no
    validation, however it is dressed up (Argo Workflows' minimal CRDs look like this).
    """
    if not isinstance(node, Mapping):
        return False
    structural = any(node.get(key) for key in _STRUCTURE)
    if node.get("x-kubernetes-preserve-unknown-fields") and not structural:
        return False
    return structural or bool(node.get("type"))


def schema_features(schema: Schema) -> KindFeatures:
    """Features that the OpenAPI schema of one kind version shows.

    >>> schema_features({"properties": {"spec": {"properties": {"paused": {"type": "boolean"}}}}}).spec_bool_paths
    ('spec.paused',)
    """
    top = schema.get("properties") or {}
    body = {name: sub for name, sub in top.items() if name not in ENVELOPE_FIELDS}
    has_validation = any(_constrains(sub) for sub in body.values())
    enum_count = 0
    cel_rules = 0
    for _, node in _walk(schema):
        if "enum" in node:
            enum_count += 1
        rules = node.get("x-kubernetes-validations")
        if isinstance(rules, list):
            cel_rules += len(rules)
    spec_bools = tuple(
        path for path, node in _walk(top.get("spec") or {}, "spec") if node.get("type") == "boolean"
    )
    status = top.get("status")
    status_props = _inline(status) if status is not None else {}
    has_conditions = None if status_props is None else "conditions" in status_props
    has_phase = None if status_props is None else "phase" in status_props
    uses_refs = any(_OBJECT_META_REF not in ref for ref in _refs(schema))
    return KindFeatures(
        has_validation=has_validation,
        uses_refs=uses_refs,
        enum_count=enum_count,
        cel_rule_count=cel_rules,
        spec_bool_paths=spec_bools,
        has_status=status is not None,
        has_conditions=has_conditions,
        has_phase=has_phase,
    )


def crd_version_features(crd: Mapping[str, Any], version: Mapping[str, Any]) -> KindFeatures:
    """Features of one served version of a CustomResourceDefinition (apiextensions.k8s.io/v1).

    Unlike a bare schema, a CRD also tells printer columns and subresources, so these are never None.
    """
    spec = crd.get("spec") or {}
    schema = ((version.get("schema") or spec.get("validation") or {}).get("openAPIV3Schema")) or {}
    base = schema_features(schema)
    subresources = version.get("subresources") or spec.get("subresources") or {}
    columns = version.get("additionalPrinterColumns") or spec.get("additionalPrinterColumns") or []
    return replace(
        base,
        printer_columns=len(columns),
        subresource_status="status" in subresources,
        subresource_scale="scale" in subresources,
    )


def crd_rows(crd: Mapping[str, Any], source: str) -> list[dict[str, Any]]:
    """One table row per version of a CRD object, in the same columns as the dataset's kinds table."""
    if crd.get("kind") != "CustomResourceDefinition":
        raise ValueError(
            f"expected a CustomResourceDefinition, got kind {crd.get('kind')!r}; pass CRD objects only"
        )
    spec = crd["spec"]
    rows = []
    for version in spec.get("versions") or [{"name": spec.get("version"), "served": True}]:
        feats = crd_version_features(crd, version)
        rows.append({
            "source": source,
            "group": spec["group"],
            "version": version["name"],
            "kind": spec["names"]["kind"],
            "scope": spec.get("scope", "Namespaced"),
            "served_by": "crd",
            "legacy_core_alias": False,
            **feats.as_row(),
        })
    return rows
