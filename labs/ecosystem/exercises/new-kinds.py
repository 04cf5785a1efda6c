"""Exercise new-kinds (E2): how many built-in kinds a later release serves that an earlier one did not.

The two releases are drawn per lab cluster (``survey.growth_question(lab)``) among the pairs where the
ways of getting it wrong give other numbers: the difference of the two releases' kind counts (removals
cancel additions), the growth table's ``added`` column summed (a kind added and removed in between counts),
and (group, version, kind) rows (a kind that moved from v1beta1 to v1 is not new). The check computes all
of them from ``datasets/builtin_kinds.csv``; the answer goes under ``new-kinds`` in ConfigMap
survey/answers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from krmcourse import Lab
from krmcourse import ecosystem as eco

ADVICE = ("Compare the set of (group, kind) pairs each release serves, from builtin_kinds.csv: the new kinds are "
          "in the later set and not in the earlier one.")


def check(lab: Lab) -> None:
    survey = lab.support("survey_support")
    q = survey.growth_question(lab)
    survey.judge(lab, survey.NEW_KINDS, q.new_kinds, {
        f"That is how many more kinds {q.until} serves than {q.since}: the kinds removed in between cancel "
        "as many new ones.": q.net_growth,
        "That adds up each release's new kinds, and counts a kind that came and went again before "
        f"{q.until}.": q.summed_added,
        "That counts versions: a kind served at a new version is not a new kind.": q.new_versions,
    }, ADVICE)


def _served(version: str, columns: list[str]) -> set[tuple[str, ...]]:
    builtin = eco.load_builtin()
    return set(builtin.loc[builtin["k8s_version"] == version, columns].itertuples(index=False, name=None))


def solve(lab: Lab) -> None:
    survey = lab.support("survey_support")
    q = survey.growth_question(lab)
    builtin = eco.load_builtin()
    since, until = (set(builtin.loc[builtin["k8s_version"] == release, ["group", "kind"]].itertuples(index=False))
                    for release in (q.since, q.until))
    survey.answer(lab, survey.NEW_KINDS, len(until - since))  # any version of a (group, kind) is the same kind


def _answer(count: Callable[[Any], int]) -> Callable[[Lab], None]:
    def attempt(lab: Lab) -> None:
        survey = lab.support("survey_support")
        survey.answer(lab, survey.NEW_KINDS, count(survey.growth_question(lab)))
    return attempt


def _summed_added(q: Any) -> int:
    growth = eco.builtin_growth(eco.load_builtin())
    after = growth.index[growth["k8s_version"] == q.since][0] + 1
    until = growth.index[growth["k8s_version"] == q.until][0]
    return int(growth.loc[after:until, "added"].sum())


#: What a hurried learner might do instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "subtract the two releases' kind counts": _answer(
        lambda q: len(_served(q.until, ["group", "kind"])) - len(_served(q.since, ["group", "kind"]))),
    "sum the growth table's added column": _answer(_summed_added),
    "count (group, version, kind) rows": _answer(
        lambda q: len(_served(q.until, ["group", "version", "kind"]) - _served(q.since, ["group", "version", "kind"]))),
}
