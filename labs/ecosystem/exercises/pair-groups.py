"""Exercise pair-groups (E5): in how many CRD API groups does a kind-pair pattern occur?

The pattern is drawn per lab cluster (``survey.pair_question(lab)``) among those where the near misses give
other numbers: counting pairs instead of groups, or running the detector over the whole schema dump (whose
built-in and aggregated kinds are no CRDs) instead of ``eco.crd_species``. Only same-group matches count,
since the notebook measured that cross-group matches are mostly wrong. The check computes each number from
``datasets/kinds.csv`` with the notebook's own detector; the answer goes under ``pair-groups`` in ConfigMap
survey/answers.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from krmcourse import Lab
from krmcourse import ecosystem as eco

ADVICE = ("Run the detector over the CRD kinds (eco.crd_species), keep the matches of that pattern inside one "
          "API group, and count the distinct groups.")


def check(lab: Lab) -> None:
    survey = lab.support("survey_support")
    q = survey.pair_question(lab)
    survey.judge(lab, survey.PAIR_GROUPS, q.groups, {
        "That counts pairs; a group with several pairs of the pattern counts once.": q.pairs,
        "That counts over the whole schema dump, whose built-in and aggregated kinds are not served by CRDs.":
            q.dump_groups,
    }, ADVICE)


def _same_group(frame: pd.DataFrame, pattern: str) -> pd.DataFrame:
    pairs = eco.detect_pairs(frame)
    return pairs[(pairs["pattern"] == pattern) & pairs["same_group"]]


def solve(lab: Lab) -> None:
    survey = lab.support("survey_support")
    pattern = survey.pair_question(lab).pattern
    pairs = eco.detect_pairs(eco.crd_species(eco.load_kinds()))  # CRD kinds only, not the whole dump
    found = pairs[(pairs["pattern"] == pattern) & pairs["same_group"]]
    survey.answer(lab, survey.PAIR_GROUPS, found["base_group"].nunique())


def _pairs_not_groups(lab: Lab) -> None:
    survey = lab.support("survey_support")
    found = _same_group(eco.crd_species(eco.load_kinds()), survey.pair_question(lab).pattern)
    survey.answer(lab, survey.PAIR_GROUPS, len(found))


def _the_whole_dump(lab: Lab) -> None:
    """Ran the detector over the dump, as the notebook's demonstration does, not over the CRDs."""
    survey = lab.support("survey_support")
    every = eco.species(eco.load_kinds())
    found = _same_group(every[every["source"] == "openshift-dump"], survey.pair_question(lab).pattern)
    survey.answer(lab, survey.PAIR_GROUPS, found["base_group"].nunique())


#: What a hurried learner might do instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "count pairs, not groups": _pairs_not_groups,
    "count over the whole schema dump": _the_whole_dump,
}
