"""``krmcourse new-lab`` scaffolds a lab that works from the first minute, and refuses bad input cleanly.

Every scaffold here goes into a temporary labs folder and notebooks folder (KRMCOURSE_LABS,
KRMCOURSE_NOTEBOOKS), never into the repository.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import test_learner_mode as learner_mode  # pytest makes tests/ importable, for conftest.py
import test_notebooks as notebook_conventions
import yaml

from krmcourse import CheckFailed, Lab, catalog, exercises, notebook_cells, scaffolding
from krmcourse.cli import main as krmcourse
from krmcourse.exercises import SOLUTIONS_ENV

NAME = "scaffolded"
PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


@pytest.fixture
def roots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Empty labs and notebooks folders under tmp_path, which the package uses instead of the repository's."""
    for folder, env in (("labs", "KRMCOURSE_LABS"), ("notebooks", "KRMCOURSE_NOTEBOOKS")):
        (tmp_path / folder).mkdir()
        monkeypatch.setenv(env, str(tmp_path / folder))
    return tmp_path


def files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_the_scaffold_loads_and_keeps_the_notebook_conventions(roots: Path, capsys) -> None:
    assert krmcourse(["new-lab", NAME, "--concepts", "C4,P2", "--title", "A lab: scaffolded"]) == 0
    assert f"{NAME}/lab.yaml" in capsys.readouterr().out

    spec = catalog.get(NAME)
    assert (spec.title, spec.concepts, spec.notebook) == ("A lab: scaffolded", ["C4", "P2"], f"00-{NAME}.ipynb")
    assert spec.questions and spec.objectives and spec.keypoints and spec.manifests
    [exercise] = spec.exercises
    assert exercise.path.is_file() and (spec.path / "instructor.md").is_file()
    assert exercise.skill and exercise.repeats is None  # every exercise names its skill (labs/README.md)

    path = roots / "notebooks" / spec.notebook
    notebook_conventions.test_notebook_is_stored_without_outputs(path)
    notebook_conventions.test_notebook_opens_with_time_and_concepts_and_ends_with_key_points(path)
    assert notebook_conventions.declared(notebook_conventions.load(path)) == {"C4", "P2"}
    assert learner_mode.solution_cell_problems(path) == []

    cells = nbformat.read(path, as_version=4).cells
    assert cells[0].source == notebook_cells.header(spec) and cells[-1].source == notebook_cells.key_points(spec)
    assert krmcourse(["sync-notebooks", "--check"]) == 0  # new-lab and sync-notebooks write the same cells
    [solution] = [c for c in cells if "solution" in c.metadata.get("tags", [])]
    assert solution.source == f'lab.show_solution("{exercise.id}")'
    assert solution.metadata["jupyter"] == {"source_hidden": True}
    at = cells.index(solution)
    assert "Not solved yet:" in cells[at - 3].source and "except CheckFailed" in cells[at - 3].source
    assert cells[at - 1].source.startswith("# Your turn")
    assert cells[at + 1].source == f'lab.check("{exercise.id}")' and "lab.down()" in cells[-2].source

    ruff = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--config", str(PYPROJECT),
                           str(roots)], capture_output=True, text=True)
    assert ruff.returncode == 0, ruff.stdout


def test_the_first_cell_is_written_from_lab_yaml_and_shows_when_they_drift_apart(roots: Path) -> None:
    made = scaffolding.new_lab(NAME, concepts=["C4"])
    stored = nbformat.read(made.notebook, as_version=4).cells[0].source
    assert stored == notebook_cells.header(made.spec)

    lab_yaml = made.spec.path / "lab.yaml"
    raw = yaml.safe_load(lab_yaml.read_text())
    old = raw["objectives"][0]
    raw["objectives"] = ["Read a condition from an object's status."]
    lab_yaml.write_text(yaml.safe_dump(raw, sort_keys=False))

    regenerated = notebook_cells.header(catalog.get(NAME))
    assert regenerated != stored
    assert "- Read a condition from an object's status." in regenerated and old not in regenerated
    assert old in stored


@pytest.mark.parametrize(("args", "says"), [
    ([NAME, "--concepts", "K1"], f"There is a lab called '{NAME}' already"),
    (["stray", "--concepts", "K1"], "already has the name 'stray'"),
    (["Scaffolded", "--concepts", "K1"], "cannot name a lab"),
    (["two--hyphens", "--concepts", "K1"], "cannot name a lab"),
    (["ends-", "--concepts", "K1"], "cannot name a lab"),
    (["x" * 60, "--concepts", "K1"], "cannot name a lab"),
    (["other", "--concepts", "K1", "--number", "0"], f"Notebook number 00 is taken by lab {NAME}"),
    (["other", "--concepts", "K1", "--number", "1"], "Notebook number 01 is taken by the notebook 01-stray.ipynb"),
    (["other", "--concepts", "K1", "--after", NAME], "01, is taken by the notebook 01-stray.ipynb"),
    (["other", "--concepts", "K1", "--after", "nowhere"], "There is no lab called 'nowhere'"),
    (["other", "--concepts", "K1", "--number", "100"], "is not between 00 and 99"),
    (["other"], "at least one concept ID"),
    (["other", "--concepts", "K1,X9"], "Not concept IDs of the course outline: X9"),
    (["other", "--concepts", "K1", "--part", "VIII"], "Part 'VIII' is not a part of the course"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_bad_input_is_refused_with_a_hint_and_leaves_nothing_behind(roots: Path, capsys, args, says) -> None:
    scaffolding.new_lab(NAME, concepts=["K1"])  # takes number 00
    (roots / "notebooks" / "01-stray.ipynb").write_text("{}")  # a notebook without a lab takes 01
    before = files(roots)
    capsys.readouterr()
    assert krmcourse(["new-lab", *args]) == 2
    err = capsys.readouterr().err
    assert says in err and "\n  -> " in err, err
    assert files(roots) == before


def test_a_failure_while_writing_removes_what_was_written(roots: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def full_disk(*_args: object, **_kwargs: object) -> None:
        raise OSError("No space left on device")

    monkeypatch.setattr(nbformat, "write", full_disk)
    with pytest.raises(OSError, match="No space left"):
        scaffolding.new_lab(NAME, concepts=["K1"])
    assert files(roots) == ["labs", "notebooks"]


@pytest.mark.cluster
def test_the_exercise_check_fails_with_a_hint_on_a_fresh_lab_and_passes_after_solve(roots: Path) -> None:
    [exercise] = scaffolding.new_lab(NAME, concepts=["K1"]).spec.exercises
    lab = Lab(NAME, say=lambda _m: None)
    try:
        lab.up()
        with pytest.raises(CheckFailed) as before:
            lab.check(exercise.id)
        assert "'starter'" in before.value.message and "draft" in before.value.message
        wrong = exercises.load(lab, exercise.id).WRONG  # the scaffold shows the convention with one
        for attempt in wrong.values():
            attempt(lab)
            with pytest.raises(CheckFailed):
                lab.check(exercise.id)
        lab.solve(exercise.id)
        lab.check(exercise.id)
    finally:
        lab.down()


@pytest.mark.cluster
def test_the_notebook_runs_to_its_end_under_nbval(roots: Path) -> None:
    made = scaffolding.new_lab(NAME, concepts=["K1"])
    env = {**os.environ, "KRMCOURSE_LABS": str(roots / "labs"), "KRMCOURSE_NOTEBOOKS": str(roots / "notebooks"),
           SOLUTIONS_ENV: "apply"}
    try:
        done = subprocess.run([sys.executable, "-m", "pytest", "--nbval-lax", "--nbval-current-env",
                               "-p", "no:cacheprovider", str(made.notebook)],
                              cwd=roots, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
        code_cells = [c for c in nbformat.read(made.notebook, as_version=4).cells if c.cell_type == "code"]
        assert f"{len(code_cells)} passed" in done.stdout, done.stdout[-2000:]
    finally:
        Lab(NAME, say=lambda _m: None).down()
