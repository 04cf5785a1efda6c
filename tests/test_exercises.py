"""Every exercise of every lab, proved both ways on a real cluster.

Exercises build on each other, so each lab gets one fresh cluster and its exercises run in order: the
check must fail (with a hint) before the solution, and pass after it. An exercise may also list the
wrong solutions a hurried learner would try (``WRONG`` in its file): after each, the check must still
fail, with a hint, and the reference solution must still work from there.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from krmcourse import CheckFailed, Lab, catalog, exercises

LABS = [spec.name for spec in catalog.all_labs() if spec.exercises]


def wrong_solutions(lab: Lab, exercise: str) -> dict[str, Callable[[Lab], None]]:
    """The exercise file's ``WRONG``: what a learner might try instead, by a short description."""
    return dict(getattr(exercises.load(lab, exercise), "WRONG", {}))


@pytest.mark.cluster
@pytest.mark.parametrize("name", LABS)
def test_each_check_fails_before_and_passes_after_its_solution(name: str) -> None:
    lab = Lab(name, say=lambda _m: None)
    try:
        lab.reset()
        for ex in lab.spec.exercises:
            with pytest.raises(CheckFailed) as before:
                lab.check(ex.id)
            assert before.value.message.strip(), f"{ex.id}: a failing check must give a hint"
            for what, attempt in wrong_solutions(lab, ex.id).items():
                attempt(lab)
                try:
                    lab.check(ex.id)
                except CheckFailed as wrong:
                    assert wrong.message.strip(), f"{ex.id}: after {what!r} the check must say what is wrong"
                else:
                    pytest.fail(f"{name}/{ex.id}: the check passed after a wrong solution: {what}")
            lab.solve(ex.id)
            # A controller may need a moment to act on the solution.
            lab.wait_until(lambda ex_id=ex.id: lab.solved(ex_id), timeout=60, interval=1,
                           message=f"{name}/{ex.id} still fails after its solution")
    finally:
        lab.down()


def test_every_listed_exercise_has_its_file() -> None:
    for spec in catalog.all_labs():
        for ex in spec.exercises:
            assert ex.path.is_file(), f"{spec.name}: {ex.path} is missing"
