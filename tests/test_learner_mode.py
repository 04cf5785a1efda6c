"""A learner's "Run All" applies no reference solution: it stops at the first exercise not yet solved.

Solution cells call ``lab.show_solution(id)``, which prints the solution and applies it only when the
learner asks (``apply=True``) or the run is the test suite's (``KRMCOURSE_SOLUTIONS=apply``, set in
conftest.py). The first test holds every notebook to that shape; the second runs notebook 00 the way
a learner's kernel would, without the test suite's setting.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from krmcourse import Lab, catalog
from krmcourse.exercises import SOLUTIONS_ENV

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
SOLUTION_CELL = re.compile(r"(\w+)\.show_solution\(\"([\w-]+)\"\)")


def solution_cell_problems(path: Path) -> list[str]:
    """What in a notebook would apply a solution during a learner's Run All, or hide one from them."""
    problems = []
    for index, cell in enumerate(nbformat.read(path, as_version=4).cells):
        if cell.cell_type != "code":
            continue
        source, tags = cell.source.strip(), cell.metadata.get("tags", [])
        if "solution" in tags:
            if not SOLUTION_CELL.fullmatch(source):
                problems.append(f"{path.name} cell {index}: a solution cell must be exactly "
                                f"lab.show_solution(\"<exercise>\"), not {source!r}")
            continue
        python = "\n".join(line[:len(line) - len(line.lstrip())] + "pass" if line.lstrip().startswith(("%", "!"))
                           else line for line in source.splitlines())
        for node in ast.walk(ast.parse(python)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                applies = any(k.arg == "apply" for k in node.keywords)
                if node.func.attr == "solve" or (node.func.attr == "show_solution" and applies):
                    problems.append(f"{path.name} cell {index}: applies a solution outside a hidden "
                                    "solution cell")
    return problems


def test_solution_cells_only_show_their_solution_in_every_notebook() -> None:
    problems = [p for path in NOTEBOOKS for p in solution_cell_problems(path)]
    assert not problems, "\n".join(problems)


def test_the_solution_cell_check_catches_a_cell_that_applies(tmp_path: Path) -> None:
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell('lab.solve("hello-namespace")', metadata={"tags": ["solution"]}),
        nbformat.v4.new_code_cell('lab.show_solution("hello-namespace", apply=True)'),
    ])
    nbformat.write(nb, tmp_path / "bad.ipynb")
    assert len(solution_cell_problems(tmp_path / "bad.ipynb")) == 2


def test_every_solution_cell_names_an_exercise_of_its_lab() -> None:
    for path in NOTEBOOKS:
        cells = nbformat.read(path, as_version=4).cells
        shown = [m.group(2) for c in cells if "solution" in c.metadata.get("tags", [])
                 if (m := SOLUTION_CELL.fullmatch(c.source.strip()))]
        labs = set(re.findall(r"Lab\(\"([\w-]+)\"", "\n".join(c.source for c in cells if c.cell_type == "code")))
        known = {ex.id for name in labs for ex in catalog.get(name).exercises}
        assert set(shown) <= known, f"{path.name}: {set(shown) - known} are not exercises of {labs}"


def exercise_shape_problems(path: Path) -> list[str]:
    """Where an exercise departs from the one shape every exercise has.

    The shape: a prompt (markdown); a check cell run before the learner starts, which prints the hint
    ("Not solved yet: ...") instead of stopping; at least one code cell for the learner's turn; the
    hidden solution cell; then the check again, as the first line of the next cell.
    """
    cells = nbformat.read(path, as_version=4).cells
    problems, since = [], 0  # since: the first cell after the previous exercise
    for index, cell in enumerate(cells):
        match = SOLUTION_CELL.fullmatch(cell.source.strip()) if "solution" in cell.metadata.get("tags", []) else None
        if not match:
            continue
        var, exercise = match.groups()
        where = f"{path.name}, exercise {exercise}"
        first = [k for k in range(since, index) if cells[k].cell_type == "code"
                 and f'{var}.check("{exercise}")' in cells[k].source
                 and "except CheckFailed" in cells[k].source and "Not solved yet" in cells[k].source]
        if not first:
            problems.append(f"{where}: no check cell before the learner's turn (try: {var}.check(...) "
                            "except CheckFailed: print('Not solved yet:', ...))")
        else:
            if not any(cells[k].cell_type == "markdown" for k in range(since, first[0])):
                problems.append(f"{where}: no prompt (a markdown cell) before its first check")
            if not any(cells[k].cell_type == "code" for k in range(first[0] + 1, index)):
                problems.append(f"{where}: no cell for the learner's turn between the first check and the solution")
        after = cells[index + 1] if index + 1 < len(cells) else None
        if after is None or after.cell_type != "code" or not after.source.startswith(f'{var}.check("{exercise}")'):
            problems.append(f"{where}: the cell after the solution must start with {var}.check(\"{exercise}\")")
        since = index + 2
    return problems


def test_every_exercise_has_the_same_shape_in_every_notebook() -> None:
    problems = [p for path in NOTEBOOKS for p in exercise_shape_problems(path)]
    assert not problems, "\n".join(problems)


def test_the_shape_check_catches_an_exercise_without_its_first_check(tmp_path: Path) -> None:
    first = 'try:\n    lab.check("x")\nexcept CheckFailed as failed:\n    print("Not solved yet:", failed)'
    good = [nbformat.v4.new_markdown_cell("### Exercise: x"), nbformat.v4.new_code_cell(first),
            nbformat.v4.new_code_cell("# Your turn"),
            nbformat.v4.new_code_cell('lab.show_solution("x")', metadata={"tags": ["solution"]}),
            nbformat.v4.new_code_cell('lab.check("x")')]
    nbformat.write(nbformat.v4.new_notebook(cells=good), tmp_path / "good.ipynb")
    assert exercise_shape_problems(tmp_path / "good.ipynb") == []
    nbformat.write(nbformat.v4.new_notebook(cells=[good[0], *good[2:4]]), tmp_path / "bad.ipynb")
    assert [p.split(": ", 1)[1][:30] for p in exercise_shape_problems(tmp_path / "bad.ipynb")] == [
        "no check cell before the learn", "the cell after the solution mu"]


@pytest.mark.cluster
def test_run_all_in_a_learners_kernel_stops_at_the_first_unsolved_check(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(SOLUTIONS_ENV, raising=False)  # the kernel inherits this process's environment
    nb = nbformat.read(ROOT / "notebooks" / "00-welcome.ipynb", as_version=4)
    client = NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
    lab = Lab("welcome")
    try:
        with pytest.raises(CellExecutionError) as stopped:
            client.execute()
        assert stopped.value.ename == "CheckFailed" and 'lab.check("hello-namespace")' in str(stopped.value), \
            stopped.value
        assert lab.get("namespace", "hello") is None, "Run All applied the reference solution"
        [solution] = [c for c in nb.cells if "solution" in c.metadata.get("tags", [])]
        shown = "".join(o.get("text", "") for o in solution.outputs)
        assert "Not applied" in shown and "def solve" in shown, shown
    finally:
        lab.down()
