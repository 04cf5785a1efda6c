"""The one way to load a lab's own Python code: by path, under a lab-qualified name, once.

``labs/<lab>/<module>.py`` (or a package there, such as the controllers lab's ``greeter``) is imported
as ``krmcourse_labs.<lab>.<module>``. Notebooks, exercise checks, controllers and tests all get the same
module object, so state a module keeps (the provisioner lab's running processes, say) is shared, and no
lab folder is ever put on ``sys.path``: two labs may have modules of the same name.

>>> prov = lab_module("provisioner", "provisioner_support")   # doctest: +SKIP
>>> prov is Lab("provisioner").support("provisioner_support")  # doctest: +SKIP
True
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from .errors import UsageError
from .paths import labs_dir

#: The package every lab's code is imported under.
ROOT = "krmcourse_labs"


def package_name(lab: str) -> str:
    """``krmcourse_labs.<lab>``, with the hyphens of a lab's name turned into underscores."""
    return f"{ROOT}.{lab.replace('-', '_')}"


def _package(name: str, path: list[str]) -> ModuleType:
    module = sys.modules.get(name)
    if module is None:
        module = ModuleType(name, f"Code of {name}, imported by krmcourse.labcode.")
        module.__path__ = path  # a package whose modules are the files of these folders
        module.__package__ = name
        sys.modules[name] = module
    return module


def lab_module(lab: str, module: str, folder: Path | None = None) -> ModuleType:
    """Import ``module`` (dotted for a package's module: ``greeter.model``) from the lab's folder.

    ``folder`` defaults to ``labs/<lab>`` of the course (or of ``KRMCOURSE_LABS``).
    """
    folder = (folder or labs_dir() / lab).resolve()
    if not folder.is_dir():
        raise UsageError(f"There is no folder for lab {lab!r} at {folder}.", "'krmcourse list' shows the labs.")
    _package(ROOT, [])
    package = _package(package_name(lab), [str(folder)])
    if package.__path__ != [str(folder)]:
        raise UsageError(f"Lab {lab!r} was already loaded from {package.__path__[0]}, not {folder}.",
                         "Load each lab's code from one folder per Python process.")
    return importlib.import_module(f"{package.__name__}.{module}")


def script_module(path: Path) -> ModuleType:
    """A course script that is not a lab's (``benchmarks/least_privilege.py``, say), imported by path once,
    as ``krmcourse_scripts.<name>``, so that tests can call its functions without touching ``sys.path``.
    While it loads, its own folder comes first on the import path, as when it runs as a script: the
    modules beside it that it imports (``benchmarks/record.py``) are found the same way."""
    path = Path(path).resolve()
    name = f"krmcourse_scripts.{path.stem}"
    _package("krmcourse_scripts", [])
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise UsageError(f"{path} is not a Python file that can be imported.", "Name a .py file.")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        sys.path.insert(0, str(path.parent))
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]  # a script that failed to load is loaded afresh next time
            raise
        finally:
            sys.path.remove(str(path.parent))
    return sys.modules[name]


def saved_function(path: Path, preferred: str | None = None) -> Callable[..., Any]:
    """The function a learner's file holds (see :meth:`krmcourse.Lab.save_code`), for a controller to call.

    The file is imported by path (:func:`script_module`). Its function called ``preferred`` is taken
    when there is one, else the one function the file defines, whatever the learner named it. Anything
    else stops the controller (``SystemExit``) with a message that names the file and what it defines.
    """
    module = script_module(Path(path))
    functions = {name: f for name, f in vars(module).items()
                 if inspect.isfunction(f) and f.__module__ == module.__name__}
    if preferred is not None and preferred in functions:
        return functions[preferred]
    if len(functions) == 1:
        return next(iter(functions.values()))
    wanted = f"one function (or one called {preferred})" if preferred else "exactly one function"
    raise SystemExit(f"{path} should define {wanted}; it defines {sorted(functions) or 'none'}.")
