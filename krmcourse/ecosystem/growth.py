"""Growth of the API surface (concept E2).

The 2019 talk counted new API groups showing up on GitHub over time; it does not say how it dated
them. No pinned source dates third-party groups, so the honest series here is the built-in API across
Kubernetes releases, read from the schemas kubernetes-validate ships for each release, dated by the day
each release's ``.0`` was announced (``kubernetes_releases.csv``, each date with its announcement).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from krmcourse.ecosystem.loading import load_releases


def builtin_growth(builtin: pd.DataFrame, releases: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per Kubernetes minor release: kinds, groups, kinds added or removed since the previous release,
    and ``release_date``, when the release came out (from :func:`load_releases` unless given).

    A kind is a (group, kind) pair at any version, so a beta graduating to v1 is not growth.
    """
    releases = load_releases() if releases is None else releases
    order = sorted(builtin["k8s_version"].unique(), key=lambda v: tuple(int(p) for p in v[1:].split(".")))
    rows = []
    previous: set[tuple[str, str]] = set()
    for version in order:
        here = builtin[builtin["k8s_version"] == version]
        current = set(zip(here["group"], here["kind"], strict=True))
        rows.append({
            "k8s_version": version,
            "kinds": len(current),
            "groups": here["group"].nunique(),
            "added": len(current - previous) if previous else None,
            "removed": len(previous - current) if previous else None,
        })
        previous = current
    table = pd.DataFrame(rows)
    table = table.merge(releases[["k8s_version", "release_date"]], on="k8s_version", how="left")
    table["added"] = table["added"].astype("Int64")
    table["removed"] = table["removed"].astype("Int64")
    return table


def kinds_per_year(growth: pd.DataFrame) -> float:
    """Least-squares slope of built-in kinds against release date, in kinds per year (dated rows only)."""
    dated = growth.dropna(subset=["release_date"])
    if len(dated) < 2:
        raise ValueError("need at least two dated releases to fit a growth rate")
    years = (dated["release_date"] - dated["release_date"].min()).dt.total_seconds() / (365.25 * 86400)
    slope, _ = np.polyfit(years.to_numpy(float), dated["kinds"].to_numpy(float), 1)
    return float(slope)


def kinds_per_group(species: pd.DataFrame) -> pd.DataFrame:
    """How many kinds each API group holds, largest first: why the talk counted groups, not kinds.

    One project can add dozens of kinds in one go (the talk's Kubeform spike, "cube form" in the
    captions), so kinds measure project size as much as ecosystem growth; groups count independent API
    designs.
    """
    counts = species.groupby("group").size().rename("kinds").sort_values(ascending=False)
    return counts.reset_index()


def kinds_per_domain(species: pd.DataFrame) -> pd.DataFrame:
    """Kinds and groups per registrable domain (the group's last two labels), largest first.

    A domain is a rough stand-in for "a project or vendor": ``cdi.kubevirt.io`` and ``kubevirt.io``
    both count for ``kubevirt.io``. It is not a list of CNCF projects, which no pinned source has.
    """
    named = species[species["group"] != ""]
    domain = named["group"].str.split(".").str[-2:].str.join(".")
    table = named.assign(domain=domain).groupby("domain").agg(groups=("group", "nunique"),
                                                             kinds=("kind", "size"))
    return table.sort_values(["kinds", "groups"], ascending=False).reset_index()
