"""Exercise checks and reference solutions, loaded from ``labs/<lab>/exercises/<id>.py``.

A check reads the real cluster and raises :class:`CheckFailed` with a hint that says what is wrong,
never what to type; ``solve`` brings the cluster to a state that passes the check.
"""

from __future__ import annotations

import importlib.util
import inspect
from types import ModuleType
from typing import TYPE_CHECKING

from .errors import CheckFailed, UsageError
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
    try:
        module.check(lab)
    except CheckFailed:
        raise
    except AssertionError as exc:
        raise CheckFailed(str(exc) or f"Exercise {exercise} is not solved yet.") from exc


def solve(lab: Lab, exercise: str) -> None:
    load(lab, exercise).solve(lab)


def solution_source(lab: Lab, exercise: str) -> tuple[str, str]:
    """Where the reference solution of ``exercise`` is, relative to the course, and its ``solve`` code."""
    module = load(lab, exercise)
    path = lab.spec.exercise(exercise).path
    try:
        shown = str(path.relative_to(lab.path.parent.parent))
    except ValueError:
        shown = str(path)
    return shown, inspect.getsource(module.solve)
