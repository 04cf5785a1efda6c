"""The Part III taxonomy as code: the decision tree, the quiz data, the grading and the widget."""

from __future__ import annotations

import pytest

from krmcourse.labcode import lab_module
from krmcourse.quiz import QUESTIONS, Pattern, classify, grade, parse, quiz_widget


@pytest.mark.parametrize(("creates", "outside", "on_requests", "expected"), [
    (True, True, False, Pattern.PROVISIONER),
    (True, False, False, Pattern.COMPOSITE),
    (True, False, True, Pattern.COMPOSITE),   # on_requests only matters for controllers that create nothing
    (False, False, True, Pattern.ENFORCER),
    (False, True, False, Pattern.GOVERNOR),   # outside_krm only matters for controllers that create
])
def test_decision_tree(creates: bool, outside: bool, on_requests: bool, expected: Pattern) -> None:
    assert classify(creates_resources=creates, outside_krm=outside, on_requests=on_requests) is expected


def test_questions_cover_every_pattern_with_unique_ids_and_explanations() -> None:
    assert {q.answer for q in QUESTIONS} == set(Pattern)
    assert len({q.id for q in QUESTIONS}) == len(QUESTIONS)
    assert all(q.need and q.why and q.example for q in QUESTIONS)


def test_grading_all_right_some_wrong_and_unanswered() -> None:
    perfect = grade({q.id: q.answer.value for q in QUESTIONS})
    assert perfect.score == perfect.total == len(QUESTIONS) and not perfect.wrong
    first, second = QUESTIONS[0], QUESTIONS[1]
    wrong = next(p for p in Pattern if p != first.answer)
    partial = grade({first.id: wrong, second.id: second.answer.value.upper()})
    assert partial.score == 1
    assert partial.wrong[0] == first.id and len(partial.wrong) == len(QUESTIONS) - 1
    marks = {m.question.id: m for m in partial.marks}
    assert marks[first.id].feedback.startswith("not quite")
    assert marks[QUESTIONS[2].id].feedback == "not answered yet"
    assert str(partial) == f"1/{len(QUESTIONS)} right"


def test_bad_input_gets_an_actionable_error() -> None:
    with pytest.raises(ValueError, match="Provisioner, Composite, Enforcer, Governor"):
        parse("Operator")
    with pytest.raises(KeyError, match="no question with id nope"):
        grade({"nope": "Composite"})
    assert parse(" governor ") is Pattern.GOVERNOR


def test_widget_grades_through_the_same_code() -> None:
    box = quiz_widget(QUESTIONS[:2])
    assert set(box.pickers) == {QUESTIONS[0].id, QUESTIONS[1].id}
    box.pickers[QUESTIONS[0].id].value = QUESTIONS[0].answer.value
    box.check(None)
    assert "1/2 right" in box.result.value


def test_widget_with_submit_shows_only_what_submit_returns() -> None:
    seen: list[dict[str, str | None]] = []

    def submit(answers: dict[str, str | None]) -> str:
        seen.append(answers)
        return "1 of 2 right <not which>"

    box = quiz_widget(QUESTIONS[:2], submit=submit)
    box.pickers[QUESTIONS[0].id].value = QUESTIONS[0].answer.value
    box.check(None)
    assert seen == [{QUESTIONS[0].id: QUESTIONS[0].answer.value, QUESTIONS[1].id: None}]
    assert box.result.value == "<p>1 of 2 right &lt;not which&gt;</p>"  # no marks per question, escaped


def test_controller_patterns_lab_grades_its_case_files_with_the_quiz_grading() -> None:
    patterns_support = lab_module("controller-patterns", "patterns_support")
    record = patterns_support._draw()
    files = patterns_support.CaseFiles(record)
    assert sorted(files.pattern(n).value for n in files.names) == sorted(p.value for p in Pattern)
    right = grade({n: files.pattern(n).value for n in files.names}, files.questions())
    assert right.score == right.total == 4
