"""The controller-patterns lab's own code: the draw, the fingerprint readers, verdicts, and the quiz's misses.

The exercises themselves (check, solve and the wrong solutions) run on a real cluster in
tests/test_exercises.py; these pin down the pieces whose mistakes would be hard to see there. All but
the last run without a cluster; the last follows the graded quiz, on a real cluster, through three misses
to a new draw.
"""

from __future__ import annotations

from typing import Any

import pytest

from krmcourse.labcode import lab_module
from krmcourse.quiz import QUESTIONS, Pattern

sup = lab_module("controller-patterns", "patterns_support")


def test_each_draw_is_new_and_puts_one_pattern_on_each_case_with_its_own_evidence() -> None:
    draws = [sup._draw() for _ in range(20)]
    for record in draws:
        files = sup.CaseFiles(record)
        assert len(files.names) == 4 and {files.pattern(n) for n in files.names} == set(Pattern)
        assert files.pattern(record["governor"]["case"]) is Pattern.GOVERNOR
        assert files.evidence(record["governor"]["case"]) == record["governor"]["manager"]
        assert files.evidence(record["provisioner"]["case"]) == record["provisioner"]["externalID"]
        assert record["governor"]["size"] != record["sizes"][record["governor"]["case"]]
        assert record["composite"]["child"] not in record["decoys"]
    # Names, and which pattern sits on the first name, change from draw to draw.
    assert len({n for r in draws for n in r["cases"]}) > 70
    assert len({sup.CaseFiles(r).pattern(sup.CaseFiles(r).names[0]) for r in draws}) > 1


def test_writers_lists_each_managers_fields_and_folds_list_items() -> None:
    obj: dict[str, Any] = {"metadata": {"managedFields": [
        {"manager": "kubectl-create", "operation": "Update",
         "fieldsV1": {"f:spec": {".": {}, "f:tier": {}}}},
        {"manager": "ctl-abcd", "operation": "Update",
         "fieldsV1": {"f:metadata": {"f:finalizers": {".": {}, 'v:"x/cleanup"': {}}}}},
        {"manager": "ctl-abcd", "operation": "Update", "subresource": "status",
         "fieldsV1": {"f:status": {".": {}, "f:externalID": {}}}},
        {"manager": "kubectl-client-side-apply", "operation": "Update",
         "fieldsV1": {"f:spec": {"f:template": {"f:spec": {"f:containers": {'k:{"name":"web"}': {
             ".": {}, "f:image": {}}}}}}}},
    ]}}
    assert sup.writers(obj) == {
        "kubectl-create": ["spec.tier"],
        "ctl-abcd": ["metadata.finalizers", "status.externalID"],
        "kubectl-client-side-apply": ["spec.template.spec.containers"],
    }
    with pytest.raises(ValueError, match="show_managed_fields=True"):
        sup.writers({"metadata": {}})


@pytest.mark.parametrize(("pattern", "given", "expected", "same"), [
    (Pattern.COMPOSITE, "ledger-k2x9q", "ledger-k2x9q", True),
    (Pattern.COMPOSITE, "ConfigMap/ledger-k2x9q", "ledger-k2x9q", True),
    (Pattern.COMPOSITE, "secret/ledger-k2x9q", "ledger-k2x9q", False),
    (Pattern.ENFORCER, "validatingadmissionpolicy/rule-abcde", "rule-abcde", True),
    (Pattern.GOVERNOR, " 'ctl-ab12' ", "ctl-ab12", True),
    (Pattern.PROVISIONER, "patterns.krmcourse.dev/cleanup", "vol-0a1b2c3d4e", False),
])
def test_evidence_may_carry_a_kind_but_must_name_the_thing(pattern: Pattern, given: str, expected: str,
                                                            same: bool) -> None:
    assert sup.same_evidence(pattern, given, expected) is same


def test_the_same_answers_have_the_same_digest_whatever_their_spacing_or_case() -> None:
    assert sup.digest({"1": "Composite", "2": "enforcer"}) == sup.digest({"2": " Enforcer ", "1": "composite"})
    assert sup.digest({"1": "Composite"}) != sup.digest({"1": "Governor"})


def test_a_sheet_prints_numbered_needs_in_its_own_order() -> None:
    sheet = sup.Sheet(tuple((str(i), q) for i, q in enumerate(reversed(QUESTIONS), 1)))
    lines = str(sheet).splitlines()
    assert lines[0] == f"1. {QUESTIONS[-1].need}" and len(lines) == len(QUESTIONS)
    assert sheet.questions[0] is QUESTIONS[-1]


def test_every_brief_that_can_be_drawn_names_its_pattern_by_its_facts() -> None:
    """The reference solution walks the tree with a brief's facts; every combination a draw can make fits."""
    from krmcourse import Lab, exercises

    walk = exercises.load(Lab("controller-patterns", say=lambda _m: None), "pattern-quiz").walk
    for pattern, facts in sup._BRIEF_FACTS.items():
        for creates in facts["creates"]:
            for acts in facts["acts"]:
                assert walk({"creates": creates, "acts": acts}) is pattern, (pattern, creates, acts)
                assert sup._brief_question("brief-x", pattern, creates, acts).answer is pattern


@pytest.mark.cluster
def test_the_third_miss_draws_new_briefs_and_the_widget_says_to_run_again() -> None:
    """Never a dead end: misses are counted, the third draws new briefs, and grading goes on honestly."""
    from krmcourse import CheckFailed, Lab

    lab = Lab("controller-patterns", instance="quiz").up()
    try:
        first = sup.quiz_sheet(lab, fresh=True)
        # Each question names a brief in the cluster, whose facts say its pattern; the sheet's text does not.
        assert all(q.id in q.need and q.answer.value not in q.need for q in first.questions)
        for question in first.questions:
            brief = lab.get("configmap", question.id, namespace=sup.CASEWORK)
            assert brief is not None and set(brief["data"]) == {"creates", "acts"}
        assert sorted(q.answer for q in first.questions) == sorted(list(Pattern) * 2)
        assert tuple(q.answer for q in first.questions) != sup.PAGE_ANSWERS
        box = sup.quiz_widget(lab)

        def submit(wrong: int, sheet: sup.Sheet = first) -> str:
            """Pick every answer right but the first ``wrong`` questions, and press the button."""
            for i, question in enumerate(sheet.questions):
                bad = next(p for p in Pattern if p is not question.answer)
                box.pickers[question.id].value = (bad if i < wrong else question.answer).value
            box.check(None)
            return str(box.result.value)

        said = submit(1)
        assert "7 of 8 right" in said and "2 more misses" in said, said
        assert "2 more misses" in submit(1), "the same answers checked again are no new attempt"
        said = submit(2)
        assert "6 of 8 right" in said and "1 more miss " in said, said
        assert sup.misses(lab, sup.SHEET) == 2
        said = submit(3)
        assert "5 of 8 right" in said and "drew again" in said and "new briefs" in said, said
        drawn = sup.read_sheet(lab)
        assert drawn is not None and sup.misses(lab, sup.SHEET) == 0
        assert lab.get("configmap", sup.QUIZ_ANSWERS, namespace=sup.CASEWORK) is None
        assert not {q.id for q in drawn.questions} & {q.id for q in first.questions}, "new names"
        assert lab.get("configmap", first.questions[0].id, namespace=sup.CASEWORK) is None, "old briefs go"
        # The buttons were made for the old briefs: they say to run the cell again, and grade nothing.
        assert "Run this cell again" in submit(0)
        assert sup.misses(lab, sup.SHEET) == 0 and not lab.solved("pattern-quiz")
        # Wrong answers on the new sheet are still graded, and still fail: the check stays honest.
        box = sup.quiz_widget(lab)
        said = submit(1, drawn)
        assert "7 of 8 right" in said and "2 more misses" in said, said
        with pytest.raises(CheckFailed, match="7 of 8 right"):
            lab.check("pattern-quiz")
        assert "All right" in submit(0, drawn)
        assert sup.read_sheet(lab) == drawn and lab.solved("pattern-quiz")
        assert "since it creates" in sup.quiz_review(lab)
    finally:
        lab.down()
