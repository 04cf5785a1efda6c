"""Ecosystem data (Part VI): the committed tables, the per-kind features, kind pairs and growth.

>>> from krmcourse import ecosystem
>>> kinds = ecosystem.load_kinds()                       # doctest: +SKIP
>>> ecosystem.adoption(ecosystem.crd_species(kinds))     # doctest: +SKIP

Only :func:`live_kinds` needs a cluster; everything else reads ``datasets/``.
"""

from krmcourse.ecosystem import plots  # figures for the notebook
from krmcourse.ecosystem.adoption import MEASURES, adoption, common_spec_booleans, has_feature
from krmcourse.ecosystem.errors import DatasetError, EcosystemError, SourceError
from krmcourse.ecosystem.explorer import explorer, filter_kinds
from krmcourse.ecosystem.features import KindFeatures, crd_rows, schema_features
from krmcourse.ecosystem.growth import builtin_growth, kinds_per_domain, kinds_per_group, kinds_per_year
from krmcourse.ecosystem.live import cluster_crds, live_kinds
from krmcourse.ecosystem.loading import (
    aggregated_groups,
    crd_species,
    datasets_dir,
    kinds_frame,
    load_builtin,
    load_kinds,
    load_label,
    load_provenance,
    load_releases,
    species,
    version_rank,
)
from krmcourse.ecosystem.pairs import PATTERNS, detect_pairs, pair_key, precision
from krmcourse.ecosystem.talk import TALK, TALK_FIGURES, comparison

__all__ = [
    "MEASURES", "PATTERNS", "TALK", "TALK_FIGURES",
    "DatasetError", "EcosystemError", "KindFeatures", "SourceError",
    "adoption", "aggregated_groups", "builtin_growth", "cluster_crds", "common_spec_booleans", "comparison",
    "crd_rows", "kinds_per_domain",
    "crd_species", "datasets_dir", "detect_pairs", "explorer", "filter_kinds", "has_feature",
    "kinds_frame", "kinds_per_group", "kinds_per_year", "live_kinds", "load_builtin", "load_kinds",
    "load_label", "load_provenance", "load_releases", "pair_key", "plots", "precision", "schema_features", "species",
    "version_rank",
]
