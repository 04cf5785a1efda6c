"""Part VI without a cluster: features of known kinds, the pair detector, labels and the talk table.

These read the committed tables in datasets/, so they also guard the tables against edits by hand.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from types import ModuleType

import pandas as pd
import pytest

from krmcourse import KrmcourseError
from krmcourse import ecosystem as eco
from krmcourse.ecosystem import releases, sources


@pytest.fixture(scope="module")
def kinds() -> pd.DataFrame:
    return eco.load_kinds()


@pytest.fixture(scope="module")
def dump(kinds: pd.DataFrame) -> pd.DataFrame:
    return eco.species(kinds[kinds["source"] == "openshift-dump"])


def one(df: pd.DataFrame, group: str, kind: str) -> pd.Series:
    rows = df[(df["group"] == group) & (df["kind"] == kind)]
    assert len(rows) == 1, f"expected one row for {group}/{kind}, found {len(rows)}"
    return rows.iloc[0]


def test_cert_manager_issuers_have_the_expected_features(dump: pd.DataFrame) -> None:
    issuer = one(dump, "cert-manager.io", "Issuer")
    cluster_issuer = one(dump, "cert-manager.io", "ClusterIssuer")
    assert issuer["scope"] == "Namespaced" and cluster_issuer["scope"] == "Cluster"
    for row in (issuer, cluster_issuer):
        assert row["served_by"] == "crd-like"
        assert row["has_validation"] and row["has_status"] and row["has_conditions"]
        assert not row["has_phase"]
        assert pd.isna(row["printer_columns"]), "the dump has no printer columns, so they are unknown"
    assert "spec.acme.disableAccountKeyGeneration" in issuer["spec_bool_paths"].split(";")


def test_a_crd_without_schema_has_no_validation(dump: pd.DataFrame) -> None:
    assert not one(dump, "dex.coreos.com", "AuthCode")["has_validation"]


def test_aggregated_and_builtin_kinds_are_told_apart(dump: pd.DataFrame) -> None:
    assert one(dump, "", "Pod")["served_by"] == "builtin"
    assert one(dump, "apps", "Deployment")["served_by"] == "builtin"
    assert one(dump, "route.openshift.io", "Route")["served_by"] == "ref-schema"
    assert one(dump, "metrics.k8s.io", "PodMetrics")["served_by"] == "ref-schema"


def test_schema_style_finds_exactly_the_hand_labelled_aggregated_groups(dump: pd.DataFrame) -> None:
    inferred = set(dump.loc[dump["served_by"] == "ref-schema", "group"])
    assert inferred == eco.aggregated_groups()


def test_dask_crds_carry_printer_columns_and_subresources(kinds: pd.DataFrame) -> None:
    dask = kinds[kinds["source"] == "dask-crds"]
    cluster = one(dask, "kubernetes.dask.org", "DaskCluster")
    job = one(dask, "kubernetes.dask.org", "DaskJob")
    assert cluster["printer_columns"] == 3 and cluster["subresource_scale"]
    assert not cluster["subresource_status"]
    assert job["subresource_status"] and not job["subresource_scale"]


def test_schema_features_on_small_schemas() -> None:
    schema = {"properties": {
        "apiVersion": {"type": "string"}, "metadata": {"type": "object"},
        "spec": {"properties": {"mode": {"type": "string", "enum": ["a", "b"]},
                                "tls": {"properties": {"enabled": {"type": "boolean"}}}},
                 "x-kubernetes-validations": [{"rule": "true"}, {"rule": "1 == 1"}]},
        "status": {"properties": {"phase": {"type": "string"}}},
    }}
    feats = eco.schema_features(schema)
    assert feats.has_validation and feats.enum_count == 1 and feats.cel_rule_count == 2
    assert feats.spec_bool_paths == ("spec.tls.enabled",)
    assert feats.has_phase and not feats.has_conditions
    hidden = eco.schema_features({"properties": {"status": {"allOf": [{"$ref": "#/x/Status"}]}}})
    assert hidden.has_conditions is None and hidden.uses_refs
    bare = eco.schema_features({"properties": {"metadata": {"type": "object"}}})
    assert not bare.has_validation


def test_crd_rows_rejects_other_objects() -> None:
    with pytest.raises(ValueError, match="CustomResourceDefinition"):
        eco.crd_rows({"kind": "ConfigMap"}, source="x")


def test_version_rank_orders_like_kubernetes() -> None:
    versions = ["v1alpha1", "v2beta1", "v1", "v1beta2", "v1beta1", "v2"]
    assert sorted(versions, key=eco.version_rank, reverse=True) == [
        "v2", "v2beta1", "v1", "v1beta2", "v1beta1", "v1alpha1"]


def test_detector_finds_known_pairs_in_the_dataset(dump: pd.DataFrame) -> None:
    found = eco.detect_pairs(dump, cross_group=False)
    keys = set(eco.pair_key(found))
    assert "X/ClusterX cert-manager.io/Issuer -> cert-manager.io/ClusterIssuer" in keys
    assert "X/ClusterX external-secrets.io/SecretStore -> external-secrets.io/ClusterSecretStore" in keys
    assert "X/XClaim /PersistentVolume -> /PersistentVolumeClaim" in keys
    assert "X/XClass snapshot.storage.k8s.io/VolumeSnapshot -> snapshot.storage.k8s.io/VolumeSnapshotClass" \
        in keys


def test_detector_leaves_non_pairs_alone(dump: pd.DataFrame) -> None:
    found = eco.detect_pairs(dump, cross_group=False)
    assert not ((found["base_kind"] == "Policy") & (found["partner_kind"] == "ClusterPolicy")).any(), \
        "Kyverno's Policy and NVIDIA's ClusterPolicy live in different groups"
    assert "Certificate" not in set(found["base_kind"])
    lone = pd.DataFrame({"group": ["a.io", "a.io"], "kind": ["Widget", "WidgetClaims"],
                         "scope": ["Namespaced", "Namespaced"]})
    assert eco.detect_pairs(lone).empty


def test_detector_needs_its_columns() -> None:
    with pytest.raises(ValueError, match="scope"):
        eco.detect_pairs(pd.DataFrame({"group": [], "kind": []}))


def test_every_detection_is_hand_labelled_and_precision_is_reported(dump: pd.DataFrame) -> None:
    found = eco.detect_pairs(dump)
    labels = eco.load_label("pair_sample")
    assert set(eco.pair_key(found)) == set(labels["key"]), "label every detection, and nothing else"
    assert labels["is_pattern"].isin(["yes", "no"]).all() and labels["reason"].str.len().gt(10).all()
    table = eco.precision(found, labels)
    same = table.xs(True, level="same_group")["precision"]
    cross = table.xs(False, level="same_group")["precision"]
    assert (same >= 0.9).all(), same
    assert (cross <= 0.5).all(), cross


def test_precision_refuses_stale_labels(dump: pd.DataFrame) -> None:
    stale = pd.DataFrame({"key": ["X/ClusterX a.io/Nope -> a.io/ClusterNope"], "is_pattern": ["yes"]})
    with pytest.raises(ValueError, match="does not find"):
        eco.precision(eco.detect_pairs(dump), stale)


def test_label_files_give_reasons() -> None:
    for name in ("aggregated_groups", "pair_sample", "dump_errata"):
        labels = eco.load_label(name)
        assert "reason" in labels.columns and labels["reason"].notna().all(), name


def test_dump_errata_are_real_gaps(dump: pd.DataFrame) -> None:
    assert dump[(dump["group"] == "kyverno.io") & (dump["kind"] == "ClusterPolicy")].empty
    assert one(dump, "kyverno.io", "Policy")["scope"] == "Namespaced"


def test_builtin_growth_reads_every_release() -> None:
    growth = eco.builtin_growth(eco.load_builtin())
    assert list(growth["k8s_version"])[:2] == ["v1.11", "v1.12"] and growth["k8s_version"].iloc[-1] == "v1.37"
    assert growth["kinds"].iloc[-1] > growth["kinds"].iloc[0]
    assert 0 < eco.kinds_per_year(growth) < 20
    assert growth["release_date"].notna().all(), "every release the schemas cover has a release date"


def test_release_table_covers_the_schemas_in_order() -> None:
    table = eco.load_releases()
    assert list(table.columns[:3]) == ["version", "release_date", "source"]
    assert set(table["k8s_version"]) == set(eco.load_builtin()["k8s_version"])
    assert table["release_date"].is_monotonic_increasing, "a later minor release cannot be released earlier"
    assert table["source"].str.startswith("https://kubernetes.io/blog/").all()
    # three releases a year since 2018: no gap between consecutive minors is shorter than 2 months
    # or longer than 6
    gaps = table["release_date"].diff().dropna().dt.days
    assert gaps.between(60, 185).all(), gaps.tolist()


def test_a_release_is_named_by_its_minor_version() -> None:
    with pytest.raises(ValueError, match="minor version"):
        releases.tag_of("1.30.1")


def test_adoption_judges_only_what_a_source_can_tell(kinds: pd.DataFrame) -> None:
    table = eco.adoption(eco.crd_species(kinds))
    assert table.loc["printer columns", "kinds judged"] == 4
    assert table.loc["validation", "kinds judged"] > 700
    assert 0 <= table.loc["validation", "percent"] <= 100


def test_comparison_labels_every_talk_figure(kinds: pd.DataFrame) -> None:
    table = eco.comparison(kinds, eco.load_builtin())
    assert eco.TALK in table.columns and len(table) == len(eco.TALK_FIGURES)
    assert table["this dataset"].str.len().gt(0).all()
    assert {"E1", "E2", "E3", "E4", "E5"} <= set(table["concept"])


def test_explorer_filters_and_builds(kinds: pd.DataFrame) -> None:
    crds = eco.crd_species(kinds)
    kubevirt = eco.filter_kinds(crds, group="kubevirt.io", scope="Namespaced", feature="conditions")
    assert len(kubevirt) > 0
    assert kubevirt["group"].str.endswith("kubevirt.io").all() and kubevirt["has_conditions"].all()
    with pytest.raises(ValueError, match="Namespaced or Cluster"):
        eco.filter_kinds(crds, scope="namespaced")
    assert eco.explorer(crds) is not None


def test_provenance_matches_the_pins() -> None:
    prov = eco.load_provenance()
    pinned = prov[prov["key"].isin([s.key for s in sources.SOURCES])]
    assert list(pinned["sha256"]) == [s.sha256 for s in sources.SOURCES]
    assert prov["licence"].str.len().gt(0).all()
    dates = prov[prov["key"] == "k8s-release-dates"].iloc[0]
    assert dates["version"] == "v1.11.0 to v1.37.0 (27 releases)" and "announcement" in dates["provides"]


def test_a_tampered_download_is_refused(tmp_path: Path) -> None:
    src = sources.SOURCES[1]
    (tmp_path / src.filename).write_bytes(b"not the pinned bytes")
    with pytest.raises(KrmcourseError, match="pinned at"):
        sources.fetch(src, tmp_path, download=False)
    assert hashlib.sha256(b"").hexdigest() != src.sha256


def test_missing_tables_say_how_to_rebuild(tmp_path: Path) -> None:
    with pytest.raises(eco.DatasetError, match="rebuild"):
        eco.load_kinds(tmp_path)


# --------------------------------------------------------------------------- the lab's dataset questions
def survey_support() -> ModuleType:
    from krmcourse.labcode import lab_module
    from krmcourse.paths import labs_dir
    return lab_module("ecosystem", "survey_support", labs_dir() / "ecosystem")


@pytest.mark.parametrize("seed", [f"seed-{n}" for n in range(25)])
def test_every_drawn_crawl_tells_species_from_the_other_ways_of_counting(seed: str, tmp_path: Path) -> None:
    """Whatever the draw, counting files, documents, CRD documents, versions or kind names misses, and the
    files a learner reads count the same as the documents the check counts."""
    import yaml

    survey = survey_support()
    counts = survey.count_crawl(survey.draw_crawl(seed))
    others = [counts.files, counts.documents, counts.crd_documents, counts.versioned_rows, counts.kind_names]
    assert counts.species not in others, counts
    assert counts.species < counts.kind_names + 2 and counts.species >= 8
    folder = survey.write_crawl(seed, tmp_path / "crawl")
    docs = [d for path in folder.rglob("*.yaml") for d in yaml.safe_load_all(path.read_text())]
    assert len([d for d in docs if d is not None]) == counts.documents
    read = {(d["spec"]["group"], d["spec"]["names"]["kind"]) for d in docs
            if d and d["kind"] == "CustomResourceDefinition"}
    assert len(read) == counts.species
    assert survey.draw_crawl(seed) == survey.draw_crawl(seed)  # the same draw in every process


def test_every_growth_and_pair_question_has_an_answer_apart_from_its_near_misses() -> None:
    survey = survey_support()
    growth = survey.growth_questions()
    assert len(growth) > 50
    for q in growth:
        assert q.new_kinds not in (q.net_growth, q.summed_added, q.new_versions), q
        assert repr(q) == f"GrowthQuestion(since={q.since!r}, until={q.until!r})"  # printed, it hides its numbers
    pairs = survey.pair_questions()
    assert {q.pattern for q in pairs} >= {"X/ClusterX"}
    for q in pairs:
        assert q.groups not in (q.pairs, q.dump_groups) and repr(q) == f"PairQuestion(pattern={q.pattern!r})"
