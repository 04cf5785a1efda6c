"""Every exercise of every lab, proved both ways on a real cluster, from the command line.

Exercises build on each other, so each lab gets one fresh cluster and its exercises run in order: the
check must fail (with a hint) before the solution, and pass after it. As a learner in a terminal
would, ``krmcourse check``, ``solve`` and ``check`` again are each a process of their own, so a
solution that only works while its own process lives fails here. An exercise may also list the wrong
solutions a hurried learner would try (``WRONG`` in its file): after each, the check must still fail,
with a hint, and the reference solution must still work from there.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

import pytest

from krmcourse import CheckFailed, Lab, catalog, exercises

LABS = [spec.name for spec in catalog.all_labs() if spec.exercises]
CLI = [sys.executable, "-m", "krmcourse.cli"]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=600)


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
            before = cli("check", name, ex.id)
            assert before.returncode == 1, f"{ex.id}: `krmcourse check` did not fail before its solution:\n" \
                                           f"{before.stdout}{before.stderr}"
            assert before.stderr.strip(), f"{ex.id}: a failing check must give a hint"
            for what, attempt in wrong_solutions(lab, ex.id).items():
                attempt(lab)
                try:
                    lab.check(ex.id)
                except CheckFailed as wrong:
                    assert wrong.message.strip(), f"{ex.id}: after {what!r} the check must say what is wrong"
                else:
                    pytest.fail(f"{name}/{ex.id}: the check passed after a wrong solution: {what}")
            solved = cli("solve", name, ex.id)
            assert solved.returncode == 0, f"{ex.id}: `krmcourse solve` failed:\n{solved.stdout}{solved.stderr}"
            # A controller may need a moment to act on the solution; then a check of its own passes.
            lab.wait_until(lambda ex_id=ex.id: lab.solved(ex_id), timeout=60, interval=1,
                           message=f"{name}/{ex.id} still fails after its solution")
            after = cli("check", name, ex.id)
            assert after.returncode == 0, f"{ex.id}: `krmcourse check` failed after `krmcourse solve` had " \
                                          f"exited:\n{after.stdout}{after.stderr}"
    finally:
        lab.down()


def test_every_listed_exercise_has_its_file() -> None:
    for spec in catalog.all_labs():
        for ex in spec.exercises:
            assert ex.path.is_file(), f"{spec.name}: {ex.path} is missing"
