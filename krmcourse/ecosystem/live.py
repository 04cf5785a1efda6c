"""Run the dataset's feature analysis on the CRDs a live lab cluster serves.

This is the one part of :mod:`krmcourse.ecosystem` that needs a cluster: it lists
CustomResourceDefinitions from the lab's API server and feeds each through the very function that
built the dataset's rows for CRD manifests, so both tables answer the same questions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

from krmcourse.ecosystem.features import crd_rows
from krmcourse.ecosystem.loading import kinds_frame

if TYPE_CHECKING:
    from krmcourse.lab import Lab


def cluster_crds(lab: Lab) -> list[dict[str, Any]]:
    """Every CustomResourceDefinition the lab's API server has, as returned by the API (not the files)."""
    return sorted(lab.objects("customresourcedefinitions"), key=lambda crd: crd["metadata"]["name"])


def live_kinds(lab: Lab) -> pd.DataFrame:
    """One row per served version of every CRD in the lab cluster, in the columns of ``kinds.csv``."""
    rows: list[dict[str, Any]] = []
    for crd in cluster_crds(lab):
        rows += crd_rows(crd, source=f"live:{lab.name}")
    return kinds_frame(rows)
