"""The notebook conventions: clean in git, objectives/time/concepts first, key points last, a lab per
notebook, and every concept of the course outline taught somewhere. And what a learner should not meet:
the course's own tests, CI or build machine, an exercise headed by its id, or a controller-runtime table
that names functions the notebook never showed."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from krmcourse import catalog

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))

# The concept IDs of the course outline (Parts I-VII).
OUTLINE = ([f"K{i}" for i in range(1, 11)] + [f"C{i}" for i in range(1, 8)] + [f"R{i}" for i in range(1, 5)]
           + [f"P{i}" for i in range(1, 6)] + [f"KP{i}" for i in range(1, 6)] + [f"A{i}" for i in range(1, 5)]
           + [f"G{i}" for i in range(1, 7)] + ["M1"] + [f"E{i}" for i in range(1, 6)]
           + ["S1", "S6"])  # Part VII: S2-S5 join with the notebooks that teach them (51, 52)


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def source(cell: dict) -> str:
    return "".join(cell.get("source", ""))


def declared(nb: dict) -> set[str]:
    head = json.dumps(nb.get("metadata", {})) + "".join(source(c) for c in nb["cells"][:2])
    return set(re.findall(r"\b(?:KP|K|C|R|P|A|G|M|E|S)\d+\b", head))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_stored_without_outputs(path: Path) -> None:
    for cell in load(path)["cells"]:
        if cell["cell_type"] == "code":
            assert cell.get("outputs") == [], f"{path.name}: a code cell has stored outputs"
            assert cell.get("execution_count") is None, f"{path.name}: a code cell has an execution count"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_opens_with_time_and_concepts_and_ends_with_key_points(path: Path) -> None:
    nb = load(path)
    first = source(nb["cells"][0])
    assert nb["cells"][0]["cell_type"] == "markdown"
    assert re.search(r"\bmin", first), f"{path.name}: the first cell states no time in minutes"
    assert "Concepts" in first or "concepts" in first, f"{path.name}: the first cell lists no concept IDs"
    assert declared(nb), f"{path.name}: no concept IDs declared"
    tail = "".join(source(c) for c in nb["cells"][-3:]).lower()
    assert "key points" in tail, f"{path.name}: no key points at the end"


def test_every_notebook_has_its_lab_and_every_lab_names_an_existing_notebook() -> None:
    names = {p.name for p in NOTEBOOKS}
    for spec in catalog.all_labs():
        if spec.notebook:
            assert spec.notebook in names, f"lab {spec.name} names a missing notebook {spec.notebook}"
    labelled = {spec.notebook for spec in catalog.all_labs()}
    for name in names:
        assert name in labelled, f"{name} has no lab whose lab.yaml names it"


def test_every_concept_of_the_outline_is_taught() -> None:
    covered: set[str] = set()
    for path in NOTEBOOKS:
        covered |= declared(load(path))
    missing = [c for c in OUTLINE if c not in covered]
    assert not missing, f"concepts no notebook declares: {missing}"


# What a learner must never be pointed at: the course's own tests, its CI, the tools that run them, or the
# machine that builds it. (A deployer's "CI pipeline" is an idea a learner needs, so it stays allowed.)
INTERNALS = re.compile(r"""
    \btests?/[\w.]                              # a path into the tests folder
  | \btest_\w+\.py\b                            # one of its test files
  | \b(?:py\.?test|nbval|conftest|xdist)\b
  | \bCI\b(?!\s+pipelines?\b)
  | \bcontinuous\s+integration\b | \bGitHub\s+Actions\b
  | \b(?:course'?s?|our|its\s+own|this\s+repository'?s?)\s+(?:own\s+)?(?:tests?|test\s+suite|suite|CI)\b
  | \btest\s+(?:suites?|runs?|machines?|hosts?)\b
  | \bbuild\s+(?:machines?|hosts?|servers?)\b
  | \b(?:two|2|four|4)[-\s]cores?\b
""", re.X | re.I)
LABS = Path(__file__).resolve().parent.parent / "labs"
#: In a lab that teaches testing an operator (concept S1), pytest, conftest, a tests folder and its test files
#: are the learner's own, not the course's: those words alone do not point at the course's internals there.
LEARNERS_OWN_TESTS = re.compile(r"\btests?/[\w.]|\btest_\w+\.py\b|\b(?:py\.?test|conftest)\b", re.I)
TEACHES_TESTING = {spec.name for spec in catalog.all_labs() if "S1" in spec.concepts}


def _internal(line: str, own_tests: bool) -> bool:
    return bool(INTERNALS.search(LEARNERS_OWN_TESTS.sub("", line) if own_tests else line))


def internals_in_notebook(nb: dict, own_tests: bool = False) -> list[str]:
    """Lines of any cell (markdown, code and its comments) that point at the course's internals."""
    return [f"cell {i}: {line.strip()}" for i, cell in enumerate(nb["cells"])
            for line in source(cell).splitlines() if _internal(line, own_tests)]


def internals_in_lab_code(text: str, own_tests: bool = False) -> list[str]:
    """String literals of a lab's Python (hints, printed text, figure titles; not docstrings, not comments)
    that point at the course's internals: they reach the learner through checks and notebook cells."""
    tree = ast.parse(text)
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [f"line {node.lineno}: {node.value.strip()[:120]}" for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
            and _internal(node.value, own_tests)]


@pytest.mark.parametrize("text", [
    "`tests/test_provisioner.py` proves it by sending SIGKILL mid-work.",
    "This course's own tests lost the Service `legacy` that way on a busy machine.",
    "About 30 s on a quiet two-core machine.",
    "print('measured on a 2-core machine')",
    "The CI run checks this cell; nbval runs the notebook.",
    "pytest -k quiz",
])
def test_a_pointer_at_the_course_internals_is_caught(text: str) -> None:
    assert internals_in_notebook({"cells": [{"cell_type": "markdown", "source": [text]}]})
    assert internals_in_lab_code(f"def hint():\n    '''A docstring.'''\n    return {text!r}\n")


@pytest.mark.parametrize(("text", "internal"), [
    ("Save your test as tests/test_events.py and run pytest on it.", False),
    ("pytest -k quiz", False),
    ("The CI run checks this cell; nbval runs the notebook.", True),
    ("This course's own tests lost the Service `legacy` that way on a busy machine.", True),
])
def test_in_a_lab_that_teaches_testing_pytest_is_the_learners_own(text: str, internal: bool) -> None:
    found = internals_in_notebook({"cells": [{"cell_type": "markdown", "source": [text]}]}, own_tests=True)
    assert bool(found) is internal, found


@pytest.mark.parametrize("text", [
    "A deployer (think of a CI pipeline, or Flux or Argo CD) creates the Deployment.",
    "`kubectl auth can-i` lets you test as you go.",
    "With the default provider etcd runs on this machine.",
    "Test the rule with a server-side dry run.",
])
def test_what_a_learner_needs_is_not_caught(text: str) -> None:
    assert not internals_in_notebook({"cells": [{"cell_type": "markdown", "source": [text]}]})


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_notebook_points_the_learner_at_the_course_internals(path: Path) -> None:
    own = any(spec.notebook == path.name and spec.name in TEACHES_TESTING for spec in catalog.all_labs())
    found = internals_in_notebook(load(path), own_tests=own)
    assert not found, (f"{path.name} points the learner at the course's tests, CI or build machine; say it in the "
                       "learner's terms, or move it to the lab's instructor.md or the README:\n" + "\n".join(found))


@pytest.mark.parametrize("path", sorted(LABS.glob("*/**/*.py")), ids=lambda p: str(p.relative_to(LABS)))
def test_no_lab_code_tells_the_learner_about_the_course_internals(path: Path) -> None:
    found = internals_in_lab_code(path.read_text(), own_tests=path.relative_to(LABS).parts[0] in TEACHES_TESTING)
    assert not found, (f"labs/{path.relative_to(LABS)} has text for the learner about the course's tests, CI or "
                       "build machine; say it in the learner's terms:\n" + "\n".join(found))


def test_exercise_headings_give_a_title_not_an_id() -> None:
    for spec in catalog.all_labs():
        if not spec.notebook:
            continue
        nb = load(NOTEBOOKS[0].parent / spec.notebook)
        headings = [line for cell in nb["cells"] if cell["cell_type"] == "markdown"
                    for line in source(cell).splitlines() if line.startswith("#")]
        for ex in spec.exercises:
            if "-" not in ex.id:
                continue  # a one-word id may well be a word of a title
            named = [h for h in headings if re.search(rf"(?<![\w-]){re.escape(ex.id)}(?![\w-])", h)]
            assert not named, (f"{spec.notebook}: the heading {named[0]!r} names exercise {ex.id} by its id; "
                               f"give its title instead ({ex.title!r})")


def unseen_functions(nb: dict) -> list[str]:
    """Functions that an "In this notebook | In controller-runtime" table names but the notebook never shows.

    A learner can map a row only to what they saw: code printed or written in the notebook, or a name its
    text uses. So a function named in a row's first column (or a Python-style one in its note) must appear
    elsewhere in the notebook, as ``name(``, ``def name`` or `` `name` ``.
    """
    found = []
    for cell in nb["cells"]:
        table = source(cell)
        if not re.search(r"^\| In this notebook \|", table, re.M):
            continue
        rest = "\n".join(source(c) for c in nb["cells"] if c is not cell)
        for row in table.splitlines():
            columns = row.split("|")
            if len(columns) < 3 or row.startswith(("|---", "| In this notebook")):
                continue
            names = re.findall(r"`(?:[\w.]+\.)?(\w+)\([^`]*\)`", columns[1])
            if len(columns) > 4:  # the note: Go's names are qualified or capitalised, the lab's Python ones not
                names += re.findall(r"`([a-z_][a-z0-9_]*)\([^`]*\)`", columns[3])
            found += [f"{name}() in: {columns[1].strip()[:70]}" for name in names
                      if not re.search(rf"(?:\bdef\s+{name}\b|\b{name}\(|`{name}`)", rest)]
    return found


def test_a_table_naming_a_function_the_learner_never_saw_is_caught() -> None:
    table = ("| In this notebook | In controller-runtime | Note |\n|---|---|---|\n"
             "| `job_for()`: a Job per Backup | `r.Create(ctx, job)` | as `reconcile_database()` does |")
    text = {"cell_type": "markdown", "source": [table]}
    assert len(unseen_functions({"cells": [text]})) == 2
    shown = {"cell_type": "code", "source": ["def job_for(backup): ...\nreconcile_database(db)"]}
    assert unseen_functions({"cells": [shown, text]}) == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_controller_runtime_tables_name_only_what_the_learner_saw(path: Path) -> None:
    found = unseen_functions(load(path))
    assert not found, (f"{path.name}: the controller-runtime table names lab-internal functions the notebook never "
                       "shows; describe what the learner saw happen, or name code they read or wrote:\n"
                       + "\n".join(found))


def test_the_kind_phase_marker_selects_every_notebook() -> None:
    """CI's kind phase runs '-m "every_provider or kind"': every notebook must be among what it selects. A hook
    that marked notebooks only after -m had deselected them once ran that phase with no notebook at all."""
    root = NOTEBOOKS[0].parent.parent
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q",
                           "--nbval-lax", "-m", "every_provider or kind", "tests/test_notebooks.py",
                           f"notebooks/{NOTEBOOKS[0].name}"], cwd=root, capture_output=True, text=True, timeout=300)
    cells = [line for line in done.stdout.splitlines() if line.startswith(f"notebooks/{NOTEBOOKS[0].name}::")]
    assert cells, f"'-m every_provider' selected no cell of {NOTEBOOKS[0].name}:\n{done.stdout[-3000:]}"
