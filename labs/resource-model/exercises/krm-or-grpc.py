"""Exercise: say whether each of a few jobs is better declared as a KRM resource or called over gRPC (K10).

The jobs are drawn at random for each set, from cases the notebook does not discuss
(``krm_reason.QUESTIONS``), so the learner applies the comparison table's rows to something new. Answers
go into the ConfigMap ``krm-or-grpc`` in ``model``. A set with a wrong answer is explained case
by case, and a new set of cases not asked before is opened: trying answers one by one finds nothing.
"""

from __future__ import annotations

from collections.abc import Callable

from krmcourse import Lab

QUESTION = "krm-or-grpc"


def check(lab: Lab) -> None:
    lab.support("krm_reason").grade(lab, QUESTION)


def solve(lab: Lab) -> None:
    reason = lab.support("krm_reason")
    reason.answer(lab, QUESTION, reason.right_answers(lab, QUESTION))


def _everything_krm(lab: Lab) -> None:
    """Every job declared as a resource: this is a course about KRM, after all."""
    lab.support("krm_reason").answer_all(lab, QUESTION, "KRM")


def _last_sets_answers_again(lab: Lab) -> None:
    """After a miss, the right answers to the set that was explained, sent again as they were."""
    lab.support("krm_reason").resend_explained(lab, QUESTION)


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "every job declared as a KRM resource": _everything_krm,
    "the explained set's right answers, sent again after it was replaced": _last_sets_answers_again,
}
