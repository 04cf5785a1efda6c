"""Load the committed ecosystem tables as pandas dataframes, and reduce versions to one row per kind.

The talk's unit is the "species": an API group and a kind. A kind served at several versions
(v1alpha1, v1beta1, v1) is one species, described by its preferred version.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd

from krmcourse.ecosystem.errors import DatasetError

#: Columns of kinds.csv, in order; rows from a live cluster use the same ones.
KINDS_COLUMNS = (
    "source", "group", "version", "kind", "scope", "served_by", "legacy_core_alias",
    "has_validation", "uses_refs", "enum_count", "has_enum", "cel_rule_count", "has_cel",
    "spec_bool_count", "spec_bool_paths", "has_status", "has_conditions", "has_phase",
    "printer_columns", "subresource_status", "subresource_scale",
)
_COUNT_COLUMNS = ("enum_count", "cel_rule_count", "spec_bool_count", "printer_columns")
BOOL_COLUMNS = (
    "legacy_core_alias", "has_validation", "uses_refs", "has_enum", "has_cel", "has_status",
    "has_conditions", "has_phase", "subresource_status", "subresource_scale",
)
_VERSION = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")
_STABILITY = {None: 2, "beta": 1, "alpha": 0}


def datasets_dir() -> Path:
    """``datasets/`` at the repository root."""
    return Path(__file__).resolve().parents[2] / "datasets"


def _read(name: str, folder: Path | None = None) -> pd.DataFrame:
    path = (folder or datasets_dir()) / name
    if not path.exists():
        raise DatasetError(
            f"{path} is missing. Rebuild the tables with `python -m krmcourse.ecosystem.rebuild` "
            "(it downloads the pinned sources with pip)."
        )
    return pd.read_csv(path, keep_default_na=False, na_values={""}, dtype=str)


def _to_bool(series: pd.Series) -> pd.Series:
    return series.map({"true": True, "false": False}).astype("boolean")


def load_kinds(folder: Path | None = None) -> pd.DataFrame:
    """``kinds.csv``: one row per (source, group, version, kind) with its features.

    Booleans are pandas' nullable ``boolean``: <NA> means the source cannot tell (a schema dump has no
    printer columns, a ``$ref`` hides a status's fields).
    """
    df = _read("kinds.csv", folder)
    df["group"] = df["group"].fillna("")
    df["spec_bool_paths"] = df["spec_bool_paths"].fillna("")
    for col in BOOL_COLUMNS:
        df[col] = _to_bool(df[col])
    for col in _COUNT_COLUMNS:
        df[col] = pd.to_numeric(df[col]).astype("Int64")
    return df


def kinds_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Rows made by :func:`krmcourse.ecosystem.features.crd_rows` as a frame typed like :func:`load_kinds`."""
    df = pd.DataFrame(rows, columns=list(KINDS_COLUMNS))
    for col in BOOL_COLUMNS:
        df[col] = df[col].astype("boolean")
    for col in _COUNT_COLUMNS:
        df[col] = pd.to_numeric(df[col]).astype("Int64")
    return df


def load_builtin(folder: Path | None = None) -> pd.DataFrame:
    """``builtin_kinds.csv``: the kinds Kubernetes itself serves, per minor release."""
    df = _read("builtin_kinds.csv", folder)
    df["group"] = df["group"].fillna("")
    return df


def load_provenance(folder: Path | None = None) -> pd.DataFrame:
    """``PROVENANCE.csv``: each pinned source with version, sha256 and licence."""
    return _read("PROVENANCE.csv", folder)


def load_releases(folder: Path | None = None) -> pd.DataFrame:
    """``kubernetes_releases.csv``: each minor release's ``.0`` and its release date (UTC, a pandas Timestamp).

    ``k8s_version`` (``v1.30``) is added so the table joins ``builtin_kinds.csv``.
    """
    df = _read("kubernetes_releases.csv", folder)
    df["release_date"] = pd.to_datetime(df["release_date"], utc=True)
    df["k8s_version"] = df["version"].str.rsplit(".", n=1).str[0]
    return df


def load_label(name: str, folder: Path | None = None) -> pd.DataFrame:
    """A hand-made label file, ``datasets/labels/<name>.csv``; every row carries its reason."""
    return _read(f"labels/{name}.csv", folder)


def version_rank(version: str) -> tuple[int, int, int]:
    """Sort key for Kubernetes API versions: v2 > v1 > v1beta2 > v1beta1 > v1alpha1.

    >>> sorted(["v1alpha1", "v1", "v1beta2"], key=version_rank, reverse=True)
    ['v1', 'v1beta2', 'v1alpha1']
    """
    match = _VERSION.match(version)
    if not match:
        return (0, -1, 0)
    major, level, number = match.groups()
    return (int(major), _STABILITY[level], int(number or 0))


def species(kinds: pd.DataFrame) -> pd.DataFrame:
    """One row per (source, group, kind): the preferred version's features, plus how many versions exist."""
    ranked = kinds.assign(_rank=kinds["version"].map(version_rank))
    ranked = ranked.sort_values(["source", "group", "kind", "_rank"], ascending=[True, True, True, False])
    counts = ranked.groupby(["source", "group", "kind"])["version"].transform("size")
    ranked = ranked.assign(versions=counts)
    first = ranked.drop_duplicates(["source", "group", "kind"], keep="first")
    return first.drop(columns="_rank").reset_index(drop=True)


def aggregated_groups(folder: Path | None = None) -> set[str]:
    """API groups hand-labelled as served by an aggregated API server (labels/aggregated_groups.csv)."""
    return set(load_label("aggregated_groups", folder)["group"])


def crd_species(kinds: pd.DataFrame, folder: Path | None = None) -> pd.DataFrame:
    """The species served through CustomResourceDefinitions: the population the talk measured.

    That is CRD manifests, plus dump kinds with an inline (CRD-style) schema outside the groups
    labelled as aggregated.
    """
    crd_like = kinds["served_by"].isin(["crd", "crd-like"])
    not_aggregated = ~kinds["group"].isin(aggregated_groups(folder))
    return species(kinds[crd_like & not_aggregated])
