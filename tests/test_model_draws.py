"""The draws behind notebook 01's exercises on K1, K5, K9 and K10, without a cluster.

Each exercise asks about something drawn for the learner's lab; these tests hold the draws to what makes
the exercises fair: a guessed plural is always wrong, the task's numbers as said never fit every field,
every set of cases has more than one right answer, and a miss opens cases not asked before and explains
the missed ones to whoever checks next. The checks on a real cluster are in test_exercises.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from krmcourse import CheckFailed
from krmcourse.labcode import lab_module

reflect = lab_module("resource-model", "krm_reflect")
reason = lab_module("resource-model", "krm_reason")


class PaperLab:
    """Just enough of a Lab for krm_reason: a state folder, and ConfigMaps kept in a dict."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.configmaps: dict[str, dict[str, Any]] = {}

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        assert kind == "configmap" and namespace == reason.NAMESPACE
        return self.configmaps.get(name)

    def apply(self, obj: dict[str, Any]) -> None:
        self.configmaps[obj["metadata"]["name"]] = obj


def test_no_kind_of_the_unseen_kind_exercise_has_the_plural_a_client_would_guess() -> None:
    for kind, plural in reflect.KINDS:
        assert plural != kind.lower() + "s", kind


def test_the_numbers_of_the_task_as_said_never_fit_every_seed_tray_field(tmp_path: Path) -> None:
    class TrayLab(PaperLab):
        def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
            return None

        def wait_for(self, *args: Any, **kwargs: Any) -> None:
            pass

    lab = TrayLab(tmp_path)
    as_said = {field: amount for field, (amount, _) in reflect.WANTED.items()}
    descriptions = [reflect.describe(f, u) for f in reflect.UNITS for u in reflect.UNITS[f]]
    assert len(set(descriptions)) == len(descriptions), "two units must never read alike"
    seen = set()
    for _ in range(300):
        reflect.seed_tray(lab, fresh=True)
        units = reflect.tray_units(lab)
        assert units is not None and reflect.tray_values(units) != as_said
        schema = lab.configmaps[reflect.TRAYS]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        fields = schema["properties"]["spec"]["properties"]
        assert {f: fields[f]["description"] for f in units} == {f: reflect.describe(f, u) for f, u in units.items()}
        seen.add(tuple(sorted(units.items())))
    assert len(seen) > 10, "the units are drawn, not fixed"


@pytest.mark.parametrize("question", sorted(reason.QUESTIONS))
def test_a_set_of_cases_always_has_more_than_one_right_answer(question: str) -> None:
    cases = reason.QUESTIONS[question]["cases"]
    for _ in range(200):
        drawn = reason._draw(question, [])
        assert len(drawn) == len(set(drawn)) == reason.QUESTIONS[question]["size"]
        assert len({cases[key].answer for key in drawn}) > 1


@pytest.mark.parametrize("question", sorted(reason.QUESTIONS))
def test_a_miss_is_explained_and_opens_cases_not_asked_before(question: str, tmp_path: Path) -> None:
    lab = PaperLab(tmp_path)
    with pytest.raises(CheckFailed, match="No cases are open yet"):
        reason.grade(lab, question)
    first = reason.open_questions(lab, question)
    cases = reason.QUESTIONS[question]["cases"]
    wrong = {key: next(c for c in reason.QUESTIONS[question]["choices"] if c != cases[key].answer)
             for key in first.keys}
    reason.answer(lab, question, wrong)
    with pytest.raises(CheckFailed) as missed:
        reason.grade(lab, question)
    second = reason.current(lab, question)
    assert second is not None and second.id != first.id
    assert not set(second.keys) & set(first.keys), "a new set asks new cases while there are any left"
    for key in first.keys:
        assert f"{key}: you said" in missed.value.message and cases[key].why in missed.value.message
    with pytest.raises(CheckFailed) as again:  # whoever checks next still reads why the last set missed
        reason.grade(lab, question)
    assert f"Set {first.id}: 0 of" in again.value.message and f"the open set is {second.id}" in again.value.message
    reason.answer(lab, question, {key: "maybe" for key in second.keys})
    with pytest.raises(CheckFailed, match="Nothing was graded"):
        reason.grade(lab, question)
    assert reason.current(lab, question) == second, "an answer that is no choice costs nothing"
    reason.answer(lab, question, reason.right_answers(lab, question))
    reason.grade(lab, question)
