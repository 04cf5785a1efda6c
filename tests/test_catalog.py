"""Labs are found by scanning labs/: a new folder is a new lab, with no change to the package."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from krmcourse import CheckFailed, Lab, UnknownExerciseError, catalog, paths, workshop

NEW_LAB = """\
title: A lab added by an instructor
notebook: 99-extra.ipynb
minutes: {teaching: 5, exercises: 10}
concepts: [K3]
exercises:
  - id: make-namespace
    title: Create the namespace 'extra'
  - id: label-namespace
    title: Label it team=blue
"""

MAKE_NAMESPACE = """\
from krmcourse import CheckFailed

def check(lab):
    if lab.get("namespace", "extra") is None:
        raise CheckFailed("There is no namespace called extra yet.")

def solve(lab):
    lab.kubectl("create", "namespace", "extra")
"""

LABEL_NAMESPACE = """\
from krmcourse import CheckFailed

def check(lab):
    ns = lab.get("namespace", "extra") or {}
    if ns.get("metadata", {}).get("labels", {}).get("team") != "blue":
        raise CheckFailed("The extra namespace does not carry the team label you were asked for.")

def solve(lab):
    lab.kubectl("label", "namespace", "extra", "team=blue", "--overwrite")
"""


@pytest.fixture
def labs_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "labs"
    (root / "extra" / "exercises").mkdir(parents=True)
    (root / "extra" / "lab.yaml").write_text(NEW_LAB)
    (root / "extra" / "exercises" / "make-namespace.py").write_text(MAKE_NAMESPACE)
    (root / "extra" / "exercises" / "label-namespace.py").write_text(LABEL_NAMESPACE)
    (root / "Not_A_Lab").mkdir()
    monkeypatch.setenv("KRMCOURSE_LABS", str(root))
    return root


def test_a_new_lab_folder_is_picked_up(labs_root):
    assert catalog.names() == ["extra"]
    spec = catalog.get("extra")
    assert [e.id for e in spec.exercises] == ["make-namespace", "label-namespace"]
    done = subprocess.run([sys.executable, "-m", "krmcourse.cli", "list"], capture_output=True, text=True,
                          env=os.environ)
    assert "extra" in done.stdout and "A lab added by an instructor" in done.stdout
    assert [s.lab for s in workshop.schedule()] == ["extra"]


def test_an_unknown_exercise_suggests_the_close_one(labs_root):
    with pytest.raises(UnknownExerciseError, match="no exercise 'make-namespac'") as err:
        catalog.get("extra").exercise("make-namespac")
    assert "make-namespace" in err.value.hint


@pytest.mark.cluster
def test_checks_fail_then_pass_and_up_at_skips_ahead(labs_root, tmp_path):
    lab = Lab("extra")
    assert [r["state"] for r in workshop.progress()] == ["not up", "not up"]
    try:
        lab.up(at="label-namespace")
        # The instructor's view runs nothing on the learner's cluster: it shows what their checks said.
        assert [r["state"] for r in workshop.progress()] == ["not tried", "not tried"]
        lab.check("make-namespace")  # solved on the way to label-namespace
        with pytest.raises(CheckFailed, match="team label"):
            lab.check("label-namespace")
        cli = [sys.executable, "-m", "krmcourse.cli"]
        failed = subprocess.run([*cli, "check", "extra", "label-namespace"], capture_output=True, text=True)
        assert failed.returncode == 1 and "team label" in failed.stderr
        rows = workshop.progress()
        assert [r["state"] for r in rows] == ["solved", "stuck"] and "team label" in rows[1]["hint"]
        assert rows[1]["checked"] >= rows[0]["checked"] > ""
        assert subprocess.run([*cli, "solve", "extra", "label-namespace"], capture_output=True).returncode == 0
        assert [r["state"] for r in workshop.progress()] == ["solved", "stuck"], "solve alone is not a check"
        assert subprocess.run([*cli, "check", "extra", "label-namespace"], capture_output=True).returncode == 0
        shown = subprocess.run([*cli, "progress", "extra"], capture_output=True, text=True)
        assert [line.split()[2] for line in shown.stdout.splitlines()] == ["solved", "solved"], shown.stdout
        # A check with a bug of its own is one row that says so, not an end to the instructor's view.
        broken = lab.spec.exercise("label-namespace").path
        broken.write_text(broken.read_text() + "\n\ndef check(lab):\n    return {}['oops']\n")
        assert [r["state"] for r in workshop.progress()] == ["solved", "solved"], "nothing ran the checks again"
        rows = workshop.progress(run=True)
        assert [r["state"] for r in rows] == ["solved", "error"]
        assert "KeyError" in rows[1]["hint"]
        assert [r["state"] for r in workshop.progress()] == ["solved", "error"], "a run's results are kept"
        # Another user's state folder (the hub's view reads each learner's): there, the lab is not up.
        assert [r["state"] for r in workshop.progress(state=tmp_path)] == ["not up", "not up"]
        assert [r["state"] for r in workshop.progress(["extra"], state=paths.state_dir())] == ["solved", "error"]
    finally:
        lab.down()
    assert [r["state"] for r in workshop.progress()] == ["not up", "not up"]


def test_a_lab_loads_its_own_support_module(labs_root):
    (labs_root / "extra" / "extra_support.py").write_text('NAMESPACE = "extra"\n')
    module = Lab("extra").support("extra_support")
    assert module.NAMESPACE == "extra"
    assert module.__file__ == str(labs_root / "extra" / "extra_support.py")
    with pytest.raises(ModuleNotFoundError, match="extra_helpers"):
        Lab("extra").support("extra_helpers")


def test_a_learners_saved_file_gives_its_function_by_name_or_as_the_only_one(tmp_path: Path) -> None:
    from krmcourse.labcode import saved_function

    (tmp_path / "named.py").write_text("def helper():\n    return 1\n\ndef wakes(old, new):\n    return True\n")
    (tmp_path / "only.py").write_text("def whatever_they_called_it(widget):\n    return 2.5\n")
    (tmp_path / "two.py").write_text("def a():\n    pass\n\ndef b():\n    pass\n")
    assert saved_function(tmp_path / "named.py", "wakes").__name__ == "wakes"
    assert saved_function(tmp_path / "only.py", "requeue_after")({}) == 2.5
    with pytest.raises(SystemExit, match=r"two.py should define one function \(or one called reconcile\); "
                                         r"it defines \['a', 'b'\]"):
        saved_function(tmp_path / "two.py", "reconcile")
    with pytest.raises(SystemExit, match="should define exactly one function"):
        saved_function(tmp_path / "named.py")


def test_reading_another_state_folder_leaves_the_environment_and_other_threads_alone(tmp_path: Path) -> None:
    own = paths.state_dir()
    seen: list[Path] = []
    with paths.state_of(tmp_path):
        assert paths.state_dir() == tmp_path
        assert os.environ.get("KRMCOURSE_HOME") != str(tmp_path), "a program started here would see the other folder"
        reader = threading.Thread(target=lambda: seen.append(paths.state_dir()))
        reader.start()
        reader.join()
    assert seen == [own], "another thread saw the folder being read"
    assert paths.state_dir() == own
