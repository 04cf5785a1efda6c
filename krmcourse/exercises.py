"""Exercise checks and reference solutions, loaded from ``labs/<lab>/exercises/<id>.py``.

A check reads the real cluster and raises :class:`CheckFailed` with a hint that says what is wrong,
never what to type; ``solve`` brings the cluster to a state that passes the check. What a check said
last is kept in the lab's state folder (``checks/<id>.json``), so that an instructor's
``krmcourse progress`` can show it without running the check again.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import shutil
import time
from datetime import UTC, datetime
from types import ModuleType
from typing import TYPE_CHECKING, Any

from .errors import CheckFailed, KrmcourseError, UsageError
from .labcode import package_name

if TYPE_CHECKING:
    from .lab import Lab

#: Set to ``apply`` (the test suite does) and notebooks' solution cells apply their solution.
SOLUTIONS_ENV = "KRMCOURSE_SOLUTIONS"


def load(lab: Lab, exercise: str) -> ModuleType:
    spec = lab.spec.exercise(exercise)
    if not spec.path.is_file():
        raise UsageError(f"Exercise {exercise!r} of lab {lab.name!r} has no file {spec.path}.",
                         "Each exercise listed in lab.yaml needs exercises/<id>.py with check() and solve().")
    # Read afresh on every call, unlike the lab's other code (krmcourse.labcode): a check always runs the
    # exercise file as it is now.
    module_spec = importlib.util.spec_from_file_location(f"{package_name(lab.name)}.exercises.{exercise}", spec.path)
    assert module_spec and module_spec.loader
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    for fn in ("check", "solve"):
        if not callable(getattr(module, fn, None)):
            raise UsageError(f"{spec.path} does not define {fn}(lab).", "See labs/README.md for the format.")
    return module


def check(lab: Lab, exercise: str) -> None:
    module = load(lab, exercise)
    lab.require_up()  # after the exercise is known: bad input is said first
    try:
        failed = _verdict(module, lab, exercise)
    except Exception as exc:
        said = exc.message if isinstance(exc, KrmcourseError) else \
            f"the check itself failed: {type(exc).__name__}: {exc}"
        _record(lab, exercise, "error", said)
        raise
    if failed is not None:
        _record(lab, exercise, "stuck", failed.message)
        raise failed
    _record(lab, exercise, "solved", "")


def _verdict(module: ModuleType, lab: Lab, exercise: str) -> CheckFailed | None:
    """Run the exercise's check: None when it passes, else the CheckFailed that says why not. A check
    may fail with CheckFailed (and a hint) or with a bare assert; anything else is the check's own error."""
    try:
        module.check(lab)
    except CheckFailed as exc:
        return exc
    except AssertionError as exc:
        failed = CheckFailed(str(exc) or f"Exercise {exercise} is not solved yet.")
        failed.__cause__ = exc
        return failed
    return None


def _record(lab: Lab, exercise: str, state: str, hint: str) -> None:
    """Keep what the check said, and when, beside the lab's cluster (gone with it on ``down``)."""
    if not lab.home.is_dir():  # no cluster: nothing to keep it beside
        return
    folder = lab.home / "checks"
    folder.mkdir(exist_ok=True)
    said = {"state": state, "hint": hint, "at": datetime.now(UTC).isoformat(timespec="seconds")}
    scratch = folder / f".{exercise}.{os.getpid()}.new"
    scratch.write_text(json.dumps(said))
    scratch.replace(folder / f"{exercise}.json")  # readers see the last record whole, never half of one


def last_result(lab: Lab, exercise: str) -> dict[str, Any] | None:
    """What the exercise's check said last on this cluster (state, hint, at), or None if it never ran."""
    try:
        said = json.loads((lab.home / "checks" / f"{exercise}.json").read_text())
    except (OSError, ValueError):
        return None
    return said if isinstance(said, dict) else None


def forget_results(lab: Lab) -> None:
    """Forget what the checks said on this cluster: a reset puts it back in a state no check has seen."""
    shutil.rmtree(lab.home / "checks", ignore_errors=True)


#: How long ``solve`` waits for its exercise's check to pass once the solution is applied.
SETTLE_SECONDS = 90.0


def solve(lab: Lab, exercise: str, settle: float = SETTLE_SECONDS) -> None:
    """Apply the reference solution, then wait until the check passes.

    A controller may need a moment to act on a solution. Returning only once the check passes means
    that whatever comes next (the notebook's check cell, ``krmcourse check`` in another terminal, the
    next exercise of ``up --at``) finds the exercise solved. Raises CheckFailed, with the check's own
    hint, when it still fails after ``settle`` seconds. The check runs quietly here: what an
    instructor's ``progress`` shows stays what the learner's own checks said.
    """
    module = load(lab, exercise)
    lab.require_up()
    module.solve(lab)
    deadline = time.monotonic() + settle
    while (failed := _verdict(module, lab, exercise)) is not None:
        if time.monotonic() > deadline:
            raise CheckFailed(f"The reference solution of {exercise} was applied, but {settle:.0f} s later "
                              f"its check still fails: {failed.message}") from failed
        time.sleep(0.5)


def solution_source(lab: Lab, exercise: str) -> tuple[str, str]:
    """Where the reference solution of ``exercise`` is, relative to the course, and its ``solve`` code."""
    module = load(lab, exercise)
    path = lab.spec.exercise(exercise).path
    try:
        shown = str(path.relative_to(lab.path.parent.parent))
    except ValueError:
        shown = str(path)
    return shown, inspect.getsource(module.solve)
