"""Every exercise of every lab, proved both ways on a real cluster, from the command line.

Exercises build on each other, so each lab gets one fresh cluster (``krmcourse up``) and its exercises
run in order, each step a command of its own as a learner types it in a terminal: ``krmcourse check``
must fail with a hint, ``krmcourse solve`` must succeed, and ``krmcourse check`` must then pass. So
whatever a solution needs (a controller, a webhook server) must outlive the command that started it.
Every exercise also lists the wrong solutions a hurried learner would try (``WRONG`` in its file, never
empty): they are functions, so they run here, in the test's process; after each, the check must still fail,
with a hint, and the reference solution must still work from there.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from terminal import cli, said

from krmcourse import CheckFailed, Lab, catalog, exercises

LABS = [spec.name for spec in catalog.all_labs() if spec.exercises]


def wrong_solutions(lab: Lab, exercise: str) -> dict[str, Callable[[Lab], None]]:
    """The exercise file's ``WRONG``: what a learner might try instead, by a short description. Every
    exercise must list at least one: a check never shown to refuse a wrong attempt is not proved."""
    module = exercises.load(lab, exercise)
    wrong = getattr(module, "WRONG", None)
    assert isinstance(wrong, dict) and wrong, (
        f"{lab.name}/{exercise}: {module.__file__} must define WRONG, a non-empty dict of the wrong solutions "
        f"a hurried learner would try (a short description -> a function of the lab), not {wrong!r}")
    for what, attempt in wrong.items():
        assert isinstance(what, str) and what.strip() and callable(attempt), (
            f"{lab.name}/{exercise}: WRONG maps a description to a function of the lab, not {what!r}: {attempt!r}")
    return dict(wrong)


@pytest.mark.cluster
@pytest.mark.parametrize("name", LABS)
def test_each_check_fails_before_and_passes_after_its_solution(name: str) -> None:
    lab = Lab(name, say=lambda _m: None)
    lab.down()  # a fresh cluster, as a learner's first `up` makes it
    up = cli("up", name)
    assert up.returncode == 0, said(up)
    try:
        for ex in lab.spec.exercises:
            before = cli("check", name, ex.id)
            assert before.returncode == 1, f"{name}/{ex.id}: `check` before `solve`:\n{said(before)}"
            assert "error:" in before.stderr and before.stderr.split("error:", 1)[1].strip(), (
                f"{ex.id}: a failing check must give a hint:\n{said(before)}")
            for what, attempt in wrong_solutions(lab, ex.id).items():
                attempt(lab)
                try:
                    lab.check(ex.id)
                except CheckFailed as wrong:
                    assert wrong.message.strip(), f"{ex.id}: after {what!r} the check must say what is wrong"
                else:
                    pytest.fail(f"{name}/{ex.id}: the check passed after a wrong solution: {what}")
            solved = cli("solve", name, ex.id)
            assert solved.returncode == 0, f"{name}/{ex.id}: `solve` failed:\n{said(solved)}"
            after = cli("check", name, ex.id)
            assert after.returncode == 0, f"{name}/{ex.id}: `check` after `solve` had exited:\n{said(after)}"
    finally:
        lab.down()


@pytest.mark.parametrize("name", LABS)
def test_every_exercise_lists_the_wrong_solutions_its_check_refuses(name: str) -> None:
    """Without a cluster, so that an exercise added without WRONG fails at once, in every run."""
    lab = Lab(name, say=lambda _m: None)
    for ex in lab.spec.exercises:
        wrong_solutions(lab, ex.id)


def test_every_listed_exercise_has_its_file() -> None:
    for spec in catalog.all_labs():
        for ex in spec.exercises:
            assert ex.path.is_file(), f"{spec.name}: {ex.path} is missing"
