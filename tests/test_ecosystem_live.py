"""The live analysis on a lab cluster sees what the dataset's extraction sees in the manifest files.

This is the promise behind the notebook's live cell: the same function, fed by the API server instead
of a file, gives the same features (the server keeps printer columns, subresources and rules).
"""

from __future__ import annotations

import pandas as pd
import pytest
import yaml

from krmcourse import Lab
from krmcourse import ecosystem as eco

COMPARED = ["group", "kind", "version", "scope", "printer_columns", "subresource_status",
            "subresource_scale", "has_validation", "enum_count", "cel_rule_count", "spec_bool_paths",
            "has_status", "has_conditions", "has_phase"]


def _from_files(lab: Lab) -> pd.DataFrame:
    rows = []
    for path in sorted((lab.path / "manifests").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == "CustomResourceDefinition":
                rows += eco.crd_rows(doc, source="files")
    return eco.kinds_frame(rows)


@pytest.mark.cluster
def test_live_features_match_the_manifests_and_find_the_pairs() -> None:
    lab = Lab("ecosystem", instance="tests")
    try:
        lab.up()
        live = eco.live_kinds(lab)
        files = _from_files(lab)
        key = ["group", "kind", "version"]
        left = live[COMPARED].sort_values(key).reset_index(drop=True)
        right = files[COMPARED].sort_values(key).reset_index(drop=True)
        pd.testing.assert_frame_equal(left, right)
        pairs = set(eco.pair_key(eco.detect_pairs(eco.species(live))))
        assert pairs == {
            "X/XClass eco.krmcourse.dev/VolumeBackup -> eco.krmcourse.dev/VolumeBackupClass",
            "X/XClaim claims.krmcourse.dev/Database -> claims.krmcourse.dev/DatabaseClaim",
            "X/ClusterX twins.krmcourse.dev/ImagePolicy -> twins.krmcourse.dev/ClusterImagePolicy",
        }
    finally:
        lab.down()
