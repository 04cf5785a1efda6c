"""lab.yaml is the one source of a notebook's first and last cells: title, time, concepts, objectives,
questions and key points. ``krmcourse sync-notebooks`` writes them; these tests fail when a notebook
and its lab.yaml have drifted apart, and prove that they can."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from krmcourse import UsageError, catalog, notebook_cells
from krmcourse.catalog import LabSpec
from krmcourse.cli import main as krmcourse
from krmcourse.paths import notebooks_dir


@pytest.mark.parametrize("spec", [s for s in catalog.all_labs() if s.notebook], ids=lambda s: s.notebook)
def test_first_and_last_cells_are_written_from_lab_yaml(spec: LabSpec) -> None:
    path = notebooks_dir() / str(spec.notebook)
    found = notebook_cells.differences(spec, json.loads(path.read_text()), str(path))
    assert not found, (f"{spec.notebook} differs from labs/{spec.name}/lab.yaml in: {', '.join(found)}. "
                       "Edit lab.yaml, then run 'krmcourse sync-notebooks'.")


def copy_lab(root: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> tuple[Path, Path]:
    """A copy of one lab's lab.yaml and its notebook, which the package then uses instead of the repository's."""
    spec = catalog.get(name)
    (root / "labs" / name).mkdir(parents=True)
    (root / "notebooks").mkdir(exist_ok=True)
    shutil.copy(spec.path / "lab.yaml", root / "labs" / name / "lab.yaml")
    shutil.copy(notebooks_dir() / str(spec.notebook), root / "notebooks" / str(spec.notebook))
    monkeypatch.setenv("KRMCOURSE_LABS", str(root / "labs"))
    monkeypatch.setenv("KRMCOURSE_NOTEBOOKS", str(root / "notebooks"))
    return root / "labs" / name / "lab.yaml", root / "notebooks" / str(spec.notebook)


def edit(lab_yaml: Path, change: Callable[[dict[str, Any]], None]) -> None:
    raw = yaml.safe_load(lab_yaml.read_text())
    change(raw)
    lab_yaml.write_text(yaml.safe_dump(raw, sort_keys=False, allow_unicode=True))


def cells(path: Path) -> list[dict[str, Any]]:
    return json.loads(path.read_text())["cells"]


def test_a_changed_objective_fails_the_test_and_sync_writes_only_that_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    lab_yaml, notebook = copy_lab(tmp_path, monkeypatch, "composite")
    before = notebook.read_text()
    old = catalog.get("composite").objectives[1]
    new = "Watch the garbage collector clean up after a deleted owner."
    edit(lab_yaml, lambda raw: raw["objectives"].__setitem__(1, new))

    with pytest.raises(AssertionError, match=r"12-composite\.ipynb differs from labs/composite/lab\.yaml in: "
                                             r"objectives\. Edit lab\.yaml"):
        test_first_and_last_cells_are_written_from_lab_yaml(catalog.get("composite"))
    capsys.readouterr()
    assert krmcourse(["sync-notebooks", "--check"]) == 1
    assert f"{notebook}: differs from lab.yaml in objectives\n" == capsys.readouterr().out
    assert notebook.read_text() == before  # --check writes nothing

    assert krmcourse(["sync-notebooks"]) == 0
    test_first_and_last_cells_are_written_from_lab_yaml(catalog.get("composite"))
    assert krmcourse(["sync-notebooks", "--check"]) == 0
    old_nb, new_nb = json.loads(before), json.loads(notebook.read_text())
    assert notebook.read_text() == json.dumps(new_nb, indent=1, ensure_ascii=False) + "\n"
    assert new_nb["cells"][1:] == old_nb["cells"][1:] and new_nb["metadata"] == old_nb["metadata"]
    first_before, first_after = old_nb["cells"][0], new_nb["cells"][0]
    assert {k: v for k, v in first_after.items() if k != "source"} == {
        k: v for k, v in first_before.items() if k != "source"}  # the cell's id and metadata are kept
    assert "".join(first_after["source"]) == "".join(first_before["source"]).replace(f"- {old}\n", f"- {new}\n")


@pytest.mark.parametrize(("lab", "change", "fields"), [
    ("composite", lambda raw: raw["keypoints"].pop(), ["key points"]),
    ("composite", lambda raw: raw.update(title="Composites"), ["title"]),
    ("composite", lambda raw: raw["minutes"].update(teaching=30), ["minutes"]),
    ("composite", lambda raw: raw.pop("questions"), ["questions"]),
    ("good-citizens", lambda raw: raw["concepts"].remove("G4"), ["concepts", "metadata concepts"]),
], ids=["key points", "title", "minutes", "questions", "concepts"])
def test_each_field_that_drifts_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         lab: str, change: Callable[[dict[str, Any]], None], fields: list[str]) -> None:
    lab_yaml, notebook = copy_lab(tmp_path, monkeypatch, lab)
    edit(lab_yaml, change)
    spec = catalog.get(lab)
    assert notebook_cells.differences(spec, json.loads(notebook.read_text())) == fields
    assert notebook_cells.sync(spec, notebook) == fields
    assert notebook_cells.sync(spec, notebook) == []


def test_the_prose_is_the_authors_and_text_sync_would_lose_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _lab_yaml, notebook = copy_lab(tmp_path, monkeypatch, "composite")
    nb = json.loads(notebook.read_text())
    first = "".join(nb["cells"][0]["source"])
    nb["cells"][0]["source"] = first.replace("A **composite** controller", "A **composite** (new prose) controller")
    notebook.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    assert krmcourse(["sync-notebooks", "--check"]) == 0  # the prose is not lab.yaml's business

    nb["cells"][0]["source"] = first + "\n\nA remark after the lists."
    notebook.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    before = notebook.read_text()
    capsys.readouterr()
    assert krmcourse(["sync-notebooks"]) == 2
    assert "text after its **Questions** list" in capsys.readouterr().err and notebook.read_text() == before

    nb["cells"][0]["source"] = first
    nb["cells"].append({"cell_type": "markdown", "id": "extra", "metadata": {}, "source": ["Next: notebook 13."]})
    notebook.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    with pytest.raises(UsageError, match="the last cell is not a Markdown cell that starts with '## Key points'"):
        notebook_cells.sync(catalog.get("composite"), notebook)


def test_every_exercise_names_its_skill_and_repeats_one_only_with_a_reason() -> None:
    problems = catalog.skill_problems(catalog.all_labs())
    assert not problems, "\n".join(problems)


def copy_lab_yamls(root: Path, monkeypatch: pytest.MonkeyPatch, *names: str) -> dict[str, Path]:
    """Copies of some labs' lab.yaml alone, which the package then reads instead of the repository's."""
    out = {}
    for name in names:
        (root / "labs" / name).mkdir(parents=True)
        out[name] = Path(shutil.copy(catalog.get(name).path / "lab.yaml", root / "labs" / name / "lab.yaml"))
    monkeypatch.setenv("KRMCOURSE_LABS", str(root / "labs"))
    return out


def test_a_missing_skill_or_a_silent_repeat_fails_and_a_reason_passes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    found = copy_lab_yamls(tmp_path, monkeypatch, "custom-resources", "job-like", "classes")
    test_every_exercise_names_its_skill_and_repeats_one_only_with_a_reason()  # the copies as they are pass

    edit(found["classes"], lambda raw: raw["exercises"][0].pop("skill"))
    with pytest.raises(AssertionError, match=r"labs/classes/lab\.yaml: exercise mark-default names no skill"):
        test_every_exercise_names_its_skill_and_repeats_one_only_with_a_reason()
    edit(found["classes"], lambda raw: raw["exercises"][0].update(skill="Make a field immutable with a CEL  "
                                                                         "transition rule (self == oldSelf)"))
    with pytest.raises(AssertionError, match=r"3 exercises practise the skill .*custom-resources/immutable-engine, "
                                             r"classes/mark-default, job-like/spec-is-immutable\), and "
                                             r"custom-resources/immutable-engine, classes/mark-default give no reason"):
        test_every_exercise_names_its_skill_and_repeats_one_only_with_a_reason()
    edit(found["classes"], lambda raw: raw["exercises"][0].update(repeats="a third time, on purpose"))
    test_every_exercise_names_its_skill_and_repeats_one_only_with_a_reason()

    edit(found["job-like"], lambda raw: raw["exercises"][1].pop("repeats"))  # two of three now say nothing
    with pytest.raises(AssertionError, match=r"custom-resources/immutable-engine, job-like/spec-is-immutable give "
                                             r"no reason"):
        test_every_exercise_names_its_skill_and_repeats_one_only_with_a_reason()


@pytest.mark.parametrize(("entry", "message"), [
    ({"skill": ""}, "'skill' must be a short phrase"),
    ({"skill": "x", "repeats": ["a list"]}, "'repeats' must be a short phrase"),
    ({"repeats": "why"}, "gives 'repeats' but no 'skill'"),
], ids=["empty skill", "repeats not text", "repeats without skill"])
def test_lab_yaml_with_a_malformed_skill_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     entry: dict[str, Any], message: str) -> None:
    found = copy_lab_yamls(tmp_path, monkeypatch, "classes")
    edit(found["classes"], lambda raw: (raw["exercises"][0].pop("skill"), raw["exercises"][0].update(entry)))
    with pytest.raises(UsageError, match=message):
        catalog.get("classes")
