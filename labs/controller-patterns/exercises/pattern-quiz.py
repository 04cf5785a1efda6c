"""Exercise: the quiz, graded. For each brief on the quiz sheet, name the pattern of the controller it plans.

The sheet (``patterns_support.quiz_sheet``) names eight briefs, numbered 1 to 8: ConfigMaps with made-up
names in ``casework``, each saying what a planned controller creates (``creates``) and when it acts
(``acts``). Which pattern each brief describes is drawn per sheet, two briefs per pattern, and kept in the
lab's state folder; the sheet's ConfigMap ``casework/quiz-sheet`` maps each number to its brief. So the page
(the decision tree, and the names on the sheet) cannot answer it: the facts the tree asks for are in the
briefs alone. The answers go into the ConfigMap ``casework/quiz-answers``, one key per number, each value a
pattern name; the notebook's widget writes them there too. The check marks them with
``krmcourse.quiz.grade``, the same code that marks the practice widget.

Why trying answers is a poor way through: the check grades only a full sheet, says how many answers are
right but not which, and counts the graded attempts that miss on the sheet itself (the same answers checked
again are not a new attempt; new answers written into a new ConfigMap are). The third miss draws a new
sheet, eight new briefs with new names and a new draw of patterns, and the hint says so: the learner can
always try again, and nothing found by trying carries over. The answers the old page gave (the course's
eight needs walked through the tree, in their order) never fit a draw.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from krmcourse import CheckFailed, Lab
from krmcourse.quiz import Pattern, classify, grade

REDRAWN = ("a new sheet of eight new briefs, each a ConfigMap in casework with a new name (print(pat.quiz_sheet(lab)) "
           "lists them). Read what each one creates and when it acts, walk the tree, and run the widget's cell again.")


def check(lab: Lab) -> None:
    sup = lab.support("patterns_support")
    sheet = sup.read_sheet(lab)
    if sheet is None:
        raise CheckFailed(f"No quiz sheet is drawn in the {sup.CASEWORK} namespace: the notebook's cell that draws "
                          "it has not run, or the sheet was changed by hand.")
    cm = lab.get("configmap", sup.QUIZ_ANSWERS, namespace=sup.CASEWORK)
    if cm is None:
        raise CheckFailed(f"There is no ConfigMap {sup.QUIZ_ANSWERS} in {sup.CASEWORK} yet: the check grades the "
                          "answers written there, one key per question number of the sheet.")
    data = {k: v.strip() for k, v in (cm.get("data") or {}).items()}
    numbers = [n for n, _ in sheet.items]
    unknown = sorted(set(data) - set(numbers))
    if unknown:
        raise CheckFailed(f"The answers use the key(s) {', '.join(unknown)}, but the sheet's questions are numbered "
                          f"1 to {len(numbers)}.")
    missing = [n for n in numbers if not data.get(n)]
    if missing:
        raise CheckFailed(f"Question(s) {', '.join(missing)} not answered yet: the check grades only a full sheet.")
    try:
        score = grade({q.id: data[n] for n, q in sheet.items}, sheet.questions)
    except ValueError as exc:
        raise CheckFailed(f"An answer is not a pattern: {exc}.") from None
    sup.judge(lab, sup.SHEET, data, score.score, score.total, what="this quiz sheet",
              redraw=lambda: sup.quiz_sheet(lab, fresh=True), redrawn=REDRAWN)


def walk(brief: dict[str, str]) -> Pattern:
    """The decision tree, walked with a brief's facts: does it create something, and where does that live
    (objects it owns are KRM objects)? If it creates nothing, does it act on requests or all the time?"""
    made, acts = brief["creates"].lower(), brief["acts"].lower()
    creates = not made.startswith("nothing")
    return classify(creates_resources=creates, outside_krm=creates and "own" not in made,
                    on_requests="request" in acts)


def solve(lab: Lab) -> None:
    sup = lab.support("patterns_support")
    sheet = sup.quiz_sheet(lab)
    answers = {}
    for number, question in sheet.items:
        brief = lab.get("configmap", question.id, namespace=sup.CASEWORK)  # read in the cluster, brief by brief
        answers[number] = walk(brief["data"]).value
    sup.answer_quiz(lab, answers)


# --------------------------------------------------------------------------- what a hurried learner tries
def _admission_taken_for_governors(lab: Lab) -> None:
    """Everything right but the two needs met at admission, taken for governors ("it changes pods")."""
    sup = lab.support("patterns_support")
    sheet = sup.quiz_sheet(lab)
    sup.answer_quiz(lab, {n: (Pattern.GOVERNOR if q.answer is Pattern.ENFORCER else q.answer).value
                          for n, q in sheet.items})


def _one_question_at_a_time(lab: Lab) -> None:
    """Start from all Composite, then try each pattern on each question, keeping whatever raises the count.

    The third miss draws a new sheet and takes the answers away; what the counts said, kept by number, is
    then about questions that have moved.
    """
    sup = lab.support("patterns_support")
    sheet = sup.quiz_sheet(lab)
    answers = {n: Pattern.COMPOSITE.value for n, _ in sheet.items}
    best = -1
    for number, _ in sheet.items:
        for pattern in Pattern:
            trial = {**answers, number: pattern.value}
            sup.answer_quiz(lab, trial)
            try:
                lab.check("pattern-quiz")
            except CheckFailed as failed:
                if sup.read_sheet(lab) != sheet:
                    return  # a new sheet: this search is over
                count = re.match(r"(\d+) of \d+ right", failed.message)
                assert count is not None, failed.message
                if int(count.group(1)) > best:
                    best, answers = int(count.group(1)), trial
            else:
                return


def _copied_from_the_page(lab: Lab) -> None:
    """The old page's answers: its eight needs walked through the decision tree, numbered in their order."""
    sup = lab.support("patterns_support")
    sup.quiz_sheet(lab)
    sup.answer_quiz(lab, {n: p.value for n, p in enumerate(sup.PAGE_ANSWERS, 1)})


def _old_sheet_answers_by_number(lab: Lab) -> None:
    """The right answers of one sheet, kept by number, given on the next sheet."""
    sup = lab.support("patterns_support")
    old = {n: q.answer.value for n, q in sup.quiz_sheet(lab).items}
    new = sup.quiz_sheet(lab, fresh=True)
    while all(q.answer.value == old[n] for n, q in new.items):  # a new draw that happens to fit: draw again
        new = sup.quiz_sheet(lab, fresh=True)
    sup.answer_quiz(lab, old)


WRONG: dict[str, Callable[[Lab], None]] = {
    "copied from the page: the decision tree applied to the old sheet's eight needs, in their order":
        _copied_from_the_page,
    "the admission-time needs answered Governor, the rest right": _admission_taken_for_governors,
    "each pattern tried on each question, keeping what raises the count": _one_question_at_a_time,
    "the right answers of the previous sheet's briefs, kept by number, on a new sheet": _old_sheet_answers_by_number,
}
