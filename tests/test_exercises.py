"""Every exercise of every lab, proved both ways on a real cluster.

Exercises build on each other, so each lab gets one fresh cluster and its exercises run in order: the
check must fail (with a hint) before the solution, and pass after it.
"""

from __future__ import annotations

import pytest

from krmcourse import CheckFailed, Lab, catalog

LABS = [spec.name for spec in catalog.all_labs() if spec.exercises]


def passes(lab: Lab, exercise: str) -> bool:
    try:
        lab.check(exercise)
    except CheckFailed:
        return False
    return True


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
            lab.solve(ex.id)
            # A controller may need a moment to act on the solution.
            lab.wait_until(lambda ex_id=ex.id: passes(lab, ex_id), timeout=60, interval=1,
                           message=f"{name}/{ex.id} still fails after its solution")
    finally:
        lab.down()


def test_every_listed_exercise_has_its_file() -> None:
    for spec in catalog.all_labs():
        for ex in spec.exercises:
            assert ex.path.is_file(), f"{spec.name}: {ex.path} is missing"
