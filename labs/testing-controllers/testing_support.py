"""Run a learner's tests of the Greeting operator, in a project of their own, as its author would.

The project is `<home>/test-project`: the lab's CRD folder (`krm_crds = manifests` in pytest.ini), and in
`tests/` the operator beside the learner's test files (from `<home>/code`, where lab.save_code puts them).
pytest runs in a process of its own, so the plugin starts its own session cluster for it. Its conftest runs
every test once per operator asked for (the correct one, and each bug): one session, one cluster, for all.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from krmcourse import CheckFailed, Lab

OPERATOR = "greeter_operator.py"
CORRECT = "correct"

# Every test runs once per variant of the operator: GREETER_BUG for the operator a test starts with
# krm_controller (it inherits the environment), and the module's BUG for a reconcile the test calls itself.
CONFTEST = """\
import os

import greeter_operator
import pytest


@pytest.fixture(autouse=True, params={variants!r})
def operator_variant(request):
    bug = "" if request.param == {correct!r} else request.param
    os.environ["GREETER_BUG"] = greeter_operator.BUG = bug
    yield request.param
    os.environ.pop("GREETER_BUG", None)
    greeter_operator.BUG = ""
"""


@dataclass
class Outcome:
    """What one pytest run said: the tests that passed, failed or errored, and its whole output."""

    returncode: int
    output: str
    passed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def of(self, variant: str) -> Outcome:
        """The same, for the tests that ran against one variant of the operator."""
        tag = f"[{variant}]"
        return Outcome(self.returncode, self.output, *([t for t in found if t.endswith(tag) or f"{tag[:-1]}-" in t]
                                                       for found in (self.passed, self.failed, self.errors)))

    def why(self, lines: int = 12) -> str:
        """The lines that say why tests failed: pytest's `E ` lines, or the end of its output."""
        said = [line for line in self.output.splitlines() if line.startswith("E ")]
        return "\n".join((said or self.output.strip().splitlines())[-lines:])

    def __str__(self) -> str:
        return "\n".join(line for line in self.output.splitlines()
                         if line.startswith(("PASSED ", "FAILED ", "ERROR "))
                         or re.match(r"^=+ .*(passed|failed|error)", line))


def project(lab: Lab, *tests: str, variants: tuple[str, ...] = (CORRECT,)) -> Path:
    root = lab.home / "test-project"
    shutil.rmtree(root, ignore_errors=True)
    (root / "tests").mkdir(parents=True)
    shutil.copytree(lab.path / "manifests", root / "manifests")
    shutil.copy(lab.path / OPERATOR, root / "tests" / OPERATOR)
    for name in tests:
        shutil.copy(lab.home / "code" / name, root / "tests" / name)
    (root / "tests" / "conftest.py").write_text(CONFTEST.format(variants=list(variants), correct=CORRECT))
    (root / "pytest.ini").write_text("[pytest]\nkrm_crds = manifests\n")
    return root


def run_tests(lab: Lab, *tests: str, variants: tuple[str, ...] = (CORRECT,)) -> Outcome:
    """pytest over the test files ``tests`` (names in <home>/code), each test once against each variant of
    the operator: "correct", or one of its bugs (greeter_operator.BUGS). ``Outcome.of(variant)`` splits them."""
    root = project(lab, *tests, variants=variants)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "_KRMCOURSE_TEST", "GREETER_"))}
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA", "--color=no",
                           *(f"tests/{name}" for name in tests)],
                          cwd=root, env=env, capture_output=True, text=True, timeout=600)
    out = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)  # plain text, whatever the terminal asked for
    outcome = Outcome(done.returncode, out)
    for line in out.splitlines():
        for word, found in (("PASSED ", outcome.passed), ("FAILED ", outcome.failed), ("ERROR ", outcome.errors)):
            if line.startswith(word):
                found.append(line[len(word):].split(" - ")[0])
    return outcome


def require_catches(lab: Lab, test_file: str, bug: str, hint: str) -> None:
    """The check of every exercise here: the learner's tests in ``test_file`` run against the real API server,
    fail on the operator with ``bug``, and pass on the correct one. ``hint`` says where to look."""
    path = lab.home / "code" / test_file
    saved = test_file.removesuffix(".py").replace("_", "-")
    if not path.is_file():
        raise CheckFailed(f"There is no {test_file} yet. Write a test function in the notebook and save it with "
                          f"lab.save_code({saved!r}, your_test_function).")
    text = path.read_text()
    if re.search(r"unittest\.mock|\bimport mock\b|Mock\(|monkeypatch|\bmocker\b", text):
        raise CheckFailed(f"{test_file} puts a stand-in (a mock or a monkeypatch) where the API server should be. "
                          "A stand-in answers what you told it to, so it cannot show how the real server answers "
                          "(a 409, a status write it drops, a finalizer it waits for). Take krm_api and krm_lab "
                          "as arguments and let the operator talk to the real cluster.")
    if not re.search(r"\bkrm_(api|lab|controller|cluster)\b", text):
        raise CheckFailed(f"{test_file} takes none of the plugin's fixtures (krm_lab, krm_api, krm_controller), so "
                          "it never reaches a cluster: ask for them as arguments of your test function.")
    both = run_tests(lab, test_file, variants=(CORRECT, bug))
    broken, good = both.of(bug), both.of(CORRECT)
    if not broken.passed and not broken.failed and not broken.errors:
        raise CheckFailed(f"pytest found no test in {test_file}: a test function's name starts with test_.\n"
                          f"{broken.why()}")
    if not broken.failed:
        if broken.errors:
            raise CheckFailed(f"Your tests could not run against the operator with the {bug} bug (an error "
                              f"before or after the test itself):\n{broken.why()}")
        raise CheckFailed(f"Your tests pass against the operator with the {bug} bug: they do not catch it. {hint}")
    if good.failed or good.errors or not good.passed:
        raise CheckFailed("Your tests fail against the correct operator too, so their failure says nothing about the "
                          f"{bug} bug. What they said:\n{good.why()}")
