"""An ipywidgets explorer over the kinds table: filter by API group, scope and feature."""

from __future__ import annotations

from typing import Any

import pandas as pd

from krmcourse.ecosystem.adoption import MEASURES, has_feature

ANY = "(any)"
SHOWN_COLUMNS = ["group", "kind", "version", "scope", "served_by", "enum_count", "cel_rule_count",
                 "spec_bool_count", "has_status", "has_conditions", "has_phase", "printer_columns"]


def filter_kinds(df: pd.DataFrame, group: str = ANY, scope: str = ANY, feature: str = ANY) -> pd.DataFrame:
    """The rows of ``df`` in ``group`` (or a group ending in ``.group``), with ``scope`` and ``feature``.

    >>> df = pd.DataFrame({"group": ["a.io", "x.a.io", "b.io"], "scope": ["Cluster"] * 3})
    >>> filter_kinds(df, group="a.io")["group"].tolist()
    ['a.io', 'x.a.io']
    """
    mask = pd.Series(True, index=df.index)
    if group != ANY:
        mask &= (df["group"] == group) | df["group"].str.endswith("." + group)
    if scope != ANY:
        if scope not in ("Namespaced", "Cluster"):
            raise ValueError(f"scope must be Namespaced or Cluster, not {scope!r}")
        mask &= df["scope"] == scope
    if feature != ANY:
        mask &= has_feature(df, feature)
    return df[mask]


def domains(df: pd.DataFrame) -> list[str]:
    """The groups and their parent domains (``kubevirt.io`` for ``cdi.kubevirt.io``), for the group picker."""
    names: set[str] = set()
    for group in df["group"]:
        parts = group.split(".")
        names.update(".".join(parts[i:]) for i in range(len(parts) - 1))
    return sorted(n for n in names if n)


def explorer(df: pd.DataFrame, rows: int = 15) -> Any:
    """A small widget: three pickers and a live table of the matching kinds with a count."""
    import ipywidgets as widgets
    from IPython.display import display

    group = widgets.Combobox(options=domains(df), placeholder="group or domain, e.g. kubevirt.io",
                             description="group", ensure_option=False)
    scope = widgets.Dropdown(options=[ANY, "Namespaced", "Cluster"], description="scope")
    feature = widgets.Dropdown(options=[ANY, *MEASURES], description="feature")
    out = widgets.Output()

    def refresh(*_: Any) -> None:
        chosen = group.value.strip() or ANY
        found = filter_kinds(df, chosen, scope.value, feature.value)
        with out:
            out.clear_output(wait=True)
            print(f"{len(found)} of {len(df)} kinds match")
            display(found[[c for c in SHOWN_COLUMNS if c in found.columns]].head(rows))

    for control in (group, scope, feature):
        control.observe(refresh, names="value")
    refresh()
    return widgets.VBox([widgets.HBox([group, scope, feature]), out])
