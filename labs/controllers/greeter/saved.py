"""A learner's code, saved from a notebook by lab.save_code: a file that defines one function."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

from krmcourse.labcode import script_module


def the_function(path: Path) -> Callable[..., Any]:
    """The one function the saved file defines; its name is the learner's choice."""
    module = script_module(Path(path))
    found = [f for f in vars(module).values() if inspect.isfunction(f) and f.__module__ == module.__name__]
    if len(found) != 1:
        raise SystemExit(f"{path} should define exactly one function; it defines {len(found)}.")
    return found[0]
