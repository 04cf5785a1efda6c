"""Exercise: say whether each of a few things is a model, a framework or a pattern (K1).

The things are drawn at random for each set, from cases the notebook's table does not list
(``krm_reason.QUESTIONS``), so the learner applies the table's distinction to something new. Answers go
into the ConfigMap ``model-framework-pattern`` in ``model``. A set with a wrong answer is explained case
by case, and a new set of cases not asked before is opened: trying answers one by one finds nothing.
"""

from __future__ import annotations

from collections.abc import Callable

from krmcourse import Lab

QUESTION = "model-framework-pattern"


def check(lab: Lab) -> None:
    lab.support("krm_reason").grade(lab, QUESTION)


def solve(lab: Lab) -> None:
    reason = lab.support("krm_reason")
    reason.answer(lab, QUESTION, reason.right_answers(lab, QUESTION))


def _everything_a_framework(lab: Lab) -> None:
    """Every case called a framework: each of them is software, after all."""
    lab.support("krm_reason").answer_all(lab, QUESTION, "framework")


def _last_sets_answers_again(lab: Lab) -> None:
    """After a miss, the right answers to the set that was explained, sent again as they were."""
    lab.support("krm_reason").resend_explained(lab, QUESTION)


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "every case called a framework": _everything_a_framework,
    "the explained set's right answers, sent again after it was replaced": _last_sets_answers_again,
}
