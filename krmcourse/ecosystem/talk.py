"""The 2019 talk's figures, beside the same measures taken on this dataset.

Every talk figure below is what the talk's recording states, in the course's words; where the automatic
captions are garbled or only hint at a slide, the text says so. ``datasets/claims.yaml`` records where
each one is found in the transcript. They are labelled "reported in the 2019 talk" wherever they are
shown; nothing here recomputes them.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from krmcourse.ecosystem import growth, loading, pairs
from krmcourse.ecosystem.adoption import adoption

TALK = "reported in the 2019 talk"


@dataclass(frozen=True)
class TalkFigure:
    concept: str
    measure: str
    reported: str


TALK_FIGURES: tuple[TalkFigure, ...] = (
    TalkFigure("E1", "raw material", "about 27,000 YAML files from GitHub, split into about 67,000 objects "
               "(with duplicates)"),
    TalkFigure("E2", "new API groups per year", "growth linear over the last year, and a guess of about 1,000 "
               "new groups in the next year; about 2,000 APIs so far; one-repository spikes such as Kubeform "
               "(the captions' \"cube form\"), with over 1,000 types in one repository"),
    TalkFigure("E2", "CRDs versus aggregated API servers", "about a hundred times more CRDs; extension API "
               "servers hardly grew at all in the last two years"),
    TalkFigure("E3", "validation", "60% of CRDs on GitHub"),
    TalkFigure("E3", "printer columns, status subresource, conditions", "no figure stated, though a slide may have "
               "shown some: printer columns recommended, the status subresource adopted well; on conditions "
               "the captions are garbled (perhaps: authors could use advice on whether and how to use them)"),
    TalkFigure("E3", "scale subresource", "about 1% of CRDs"),
    TalkFigure("E4", "CNCF projects using KRM", "18 projects in their core, 6 more through an operator; "
               "136 types"),
    TalkFigure("E5", "X/ClusterX pairs in one API group", "around 40"),
    TalkFigure("E5", "X/XClaim and X/XClass", "XClaim: a fairly small number, one of them "
               "(ObjectBucketClaim) used in quite a few places; XClass: a decent number, three places in "
               "the core API by the speaker's guess"),
)


def _pct(table: pd.DataFrame, measure: str) -> str:
    row = table.loc[measure]
    if not row["kinds judged"]:
        return "not in this source"
    return f"{row['percent']:.0f}% ({row['kinds with it']} of {row['kinds judged']})"


def comparison(kinds: pd.DataFrame, builtin: pd.DataFrame) -> pd.DataFrame:
    """One row per talk figure: what the talk reported, what this dataset measures, and whether they compare."""
    crds = loading.crd_species(kinds)
    dump = crds[crds["source"] == "openshift-dump"]
    manifests = crds[crds["source"] != "openshift-dump"]
    dump_table = adoption(dump)
    manifest_table = adoption(manifests)
    every = loading.species(kinds)
    ref = every[(every["source"] == "openshift-dump") & (every["served_by"] == "ref-schema")]
    rate = growth.kinds_per_year(growth.builtin_growth(builtin))
    detected = pairs.detect_pairs(loading.species(kinds[kinds["source"] == "openshift-dump"]))
    labels = loading.load_label("pair_sample")
    keyed = detected.assign(key=pairs.pair_key(detected)).merge(labels, on="key", how="left")
    same = keyed[keyed["same_group"]]
    true_cluster_x = int(((same["pattern"] == "X/ClusterX") & (same["is_pattern"] == "yes")).sum())
    claim_class = same[same["pattern"] != "X/ClusterX"]
    ours = {
        "raw material": f"{len(kinds)} (group, version, kind) rows from 2 packages, {len(every)} kinds after "
                        "keeping one version per kind",
        "new API groups per year": f"not measurable: no source dates third-party groups. Built-in API: "
                                   f"{rate:.1f} kinds a year ({builtin['k8s_version'].nunique()} releases)",
        "CRDs versus aggregated API servers": f"{dump['group'].nunique()} CRD groups ({len(dump)} kinds) vs "
                                              f"{ref['group'].nunique()} aggregated groups ({len(ref)} kinds) "
                                              "in one cluster",
        "validation": _pct(dump_table, "validation"),
        "printer columns, status subresource, conditions":
            f"printer columns {_pct(manifest_table, 'printer columns')}, status subresource "
            f"{_pct(manifest_table, 'status subresource')} (CRD manifests only); conditions "
            f"{_pct(dump_table, 'conditions')}",
        "scale subresource": _pct(manifest_table, "scale subresource") + " (CRD manifests only)",
        "CNCF projects using KRM": f"not measurable: no source lists CNCF projects. {dump['group'].nunique()} "
                                   "third-party API groups in one cluster",
        "X/ClusterX pairs in one API group": f"{true_cluster_x} (hand-checked) in one cluster",
        "X/XClaim and X/XClass": f"{int((claim_class['pattern'] == 'X/XClaim').sum())} XClaim and "
                                 f"{int((claim_class['pattern'] == 'X/XClass').sum())} XClass detections "
                                 "in one API group",
    }
    comparable = {
        "raw material": "no: a crawl of public repositories versus one cluster's installed APIs",
        "new API groups per year": "no",
        "CRDs versus aggregated API servers": "roughly: same question, one cluster instead of GitHub",
        "validation": "roughly: same measure; CRD v1 (2019: optional in v1beta1) now requires a schema",
        "printer columns, status subresource, conditions": "no: the talk states no figure for these (and the "
                                                           "subresources rest on 4 CRDs)",
        "scale subresource": "no: 4 CRDs from one project",
        "CNCF projects using KRM": "no",
        "X/ClusterX pairs in one API group": "roughly: one cluster versus all of GitHub",
        "X/XClaim and X/XClass": "roughly",
    }
    rows = [{"concept": f.concept, "measure": f.measure, TALK: f.reported, "this dataset": ours[f.measure],
             "comparable?": comparable[f.measure]} for f in TALK_FIGURES]
    return pd.DataFrame(rows)
