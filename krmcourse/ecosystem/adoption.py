"""Feature adoption: the share of kinds that use each API feature (concept E3).

Shares are computed only over kinds whose source can tell: a schema dump says nothing about printer
columns, so those are measured on the CRD manifests alone, and the denominator is printed beside it.
"""

from __future__ import annotations

import pandas as pd

#: Measure name -> (column, what it means). Order is the order of the talk's slide.
MEASURES: dict[str, tuple[str, str]] = {
    "validation": ("has_validation", "schema constrains a field beyond apiVersion/kind/metadata"),
    "printer columns": ("_has_printer_columns", "CRD declares additionalPrinterColumns"),
    "status subresource": ("subresource_status", "CRD enables the /status subresource"),
    "status field": ("has_status", "schema has a top-level status"),
    "conditions": ("has_conditions", "status has a conditions field"),
    "scale subresource": ("subresource_scale", "CRD enables the /scale subresource"),
    "phase": ("has_phase", "status has a phase field (an anti-pattern the course discusses)"),
    "enum": ("has_enum", "at least one field restricted by enum"),
    "CEL rules": ("has_cel", "at least one x-kubernetes-validations rule"),
    "boolean in spec": ("_has_spec_bool", "at least one boolean field under spec (see A2)"),
}


def _prepared(df: pd.DataFrame) -> pd.DataFrame:
    cols = df["printer_columns"]
    return df.assign(
        _has_printer_columns=(cols > 0).astype("boolean").where(cols.notna()),
        _has_spec_bool=(df["spec_bool_count"] > 0).astype("boolean"),
    )


def adoption(df: pd.DataFrame) -> pd.DataFrame:
    """For each measure: kinds that can be judged, kinds that have it, and the percentage.

    A kind whose source cannot tell (<NA>) is left out of that measure's denominator.
    """
    prepared = _prepared(df)
    rows = []
    for measure, (column, meaning) in MEASURES.items():
        known = prepared[column].dropna()
        have = int(known.sum())
        rows.append({
            "measure": measure,
            "kinds judged": len(known),
            "kinds with it": have,
            "percent": round(100.0 * have / len(known), 1) if len(known) else None,
            "meaning": meaning,
        })
    return pd.DataFrame(rows).set_index("measure")


def has_feature(df: pd.DataFrame, measure: str) -> pd.Series:
    """Boolean mask of kinds with ``measure`` (unknown counts as False), for filtering."""
    if measure not in MEASURES:
        raise KeyError(f"unknown measure {measure!r}; choose one of: {', '.join(MEASURES)}")
    column = MEASURES[measure][0]
    return _prepared(df)[column].fillna(False).astype(bool)


def common_spec_booleans(df: pd.DataFrame, top: int = 10, depth: int = 1) -> pd.DataFrame:
    """The boolean field names found in the most kinds' specs, at most ``depth`` levels below ``spec``.

    Names like ``enabled`` or ``disabled`` are where anti-pattern A2 starts: a yes/no that later needs
    a third value. Deeper levels are dominated by embedded Pod templates (``readOnly``, ``privileged``),
    which is why the default looks only at the spec's own fields.
    """
    def names(paths: str) -> set[str]:
        found = set()
        for path in filter(None, paths.split(";")):
            parts = path.replace("[]", "").replace("{}", "").split(".")
            if len(parts) - 1 <= depth:
                found.add(parts[-1])
        return found

    leaves = df["spec_bool_paths"].fillna("").map(names)
    counts = leaves.explode().dropna().value_counts().head(top)
    return counts.rename_axis("boolean field").rename("kinds").reset_index()
