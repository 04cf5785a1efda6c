"""``krmcourse new-lab``: a new lab folder and its notebook, working from the first minute.

The scaffold is a small lab that already keeps the course's promises: its manifest gives the cluster a
starting state, its one exercise has a check that reads that state and fails with a hint until the
reference solution is applied, and its notebook opens and closes with cells written from ``lab.yaml``
(:mod:`krmcourse.notebook_cells`). The author then replaces the starter exercise with the real one.

Every input is checked before anything is written, and a failure while writing removes what was
written, so a refused or failed scaffold leaves nothing behind.

>>> from krmcourse import scaffolding
>>> made = scaffolding.new_lab("status-conditions", concepts=["C4"])   # doctest: +SKIP
>>> made.notebook.name                                                   # doctest: +SKIP
'41-status-conditions.ipynb'
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from string import Template
from typing import cast

import nbformat
import yaml

from . import catalog, notebook_cells
from .errors import UsageError
from .paths import labs_dir, notebooks_dir

PARTS = ("I", "II", "III", "IV", "V", "VI", "VII")
#: The longest lab name whose cluster name, ``krm-<name>``, is still a DNS-1123 label (63 characters).
MAX_NAME = 63 - len("krm-")
EXERCISE = "mark-ready"


@dataclass(frozen=True)
class NewLab:
    """What :func:`new_lab` wrote."""

    spec: catalog.LabSpec
    notebook: Path

    @property
    def files(self) -> list[Path]:
        return sorted(p for p in self.spec.path.rglob("*") if p.is_file()) + [self.notebook]


def new_lab(name: str, *, concepts: list[str], title: str | None = None, number: int | None = None,
            after: str | None = None, part: str | None = None) -> NewLab:
    """Write ``labs/<name>/`` and ``notebooks/NN-<name>.ipynb`` under the course's roots.

    ``number`` is the notebook's place in the course; ``after`` puts it right after that lab's
    notebook instead; with neither, it comes after the last notebook.
    """
    _check_name(name)
    taken = _numbers_in_use()
    chosen = _choose_number(taken, number, after)
    _check_concepts(concepts)
    part = part or _part_before(chosen)
    if part not in PARTS:
        raise UsageError(f"Part {part!r} is not a part of the course.", f"Use one of {', '.join(PARTS)}.")

    folder = labs_dir() / name
    notebook = notebooks_dir() / f"{chosen:02d}-{name}.ipynb"
    values = {"lab": name, "exercise": EXERCISE, "number": f"{chosen:02d}",
              "title": title or name.replace("-", " ").capitalize()}
    folder.mkdir(parents=True)  # fails, touching nothing, if someone made it since the check
    try:
        _write_lab(folder, values, part=part, concepts=concepts, after=after)
        spec = catalog.load(folder)  # what every other command will read: it must load
        notebook.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(_notebook(spec), notebook)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        notebook.unlink(missing_ok=True)
        raise
    return NewLab(spec, notebook)


# ------------------------------------------------------------------------------------------ checks
def _check_name(name: str) -> None:
    if not catalog.NAME.match(name) or len(name) > MAX_NAME:
        raise UsageError(f"{name!r} cannot name a lab: a lab's name must be a DNS-1123 label of lowercase "
                         f"words joined by single hyphens, at most {MAX_NAME} characters.",
                         "Use letters a-z, digits and hyphens, starting and ending with a letter or digit, "
                         "e.g. 'status-conditions'.")
    folder = labs_dir() / name
    if folder.exists():
        raise UsageError(f"There is a lab called {name!r} already: {folder}.",
                         "Choose another name, or edit that lab (krmcourse list shows every lab).")
    clashing = sorted(notebooks_dir().glob(f"[0-9][0-9]-{name}.ipynb"))
    if clashing:
        raise UsageError(f"The notebook {clashing[0]} already has the name {name!r}.",
                         "Choose another name, or give that notebook the lab it is missing.")


def _check_concepts(concepts: list[str]) -> None:
    if not concepts:
        raise UsageError("A lab needs at least one concept ID of the course outline.",
                         "Name what it teaches, e.g. --concepts C4,P2 (the README's table of parts lists them).")
    wrong = [c for c in concepts if not catalog.CONCEPT.match(c)]
    if wrong:
        raise UsageError(f"Not concept IDs of the course outline: {', '.join(wrong)}.",
                         "Use IDs such as K2, P5 or KP1 (the README's table of parts lists them).")


def _numbers_in_use() -> dict[int, str]:
    """Each notebook number in use, and what uses it: a notebook file, or a lab whose lab.yaml names one."""
    taken: dict[int, str] = {}
    for spec in catalog.all_labs():
        if spec.number is not None:
            taken[spec.number] = f"lab {spec.name} ({spec.notebook})"
    if notebooks_dir().is_dir():
        for path in notebooks_dir().glob("*.ipynb"):
            if path.name[:2].isdigit() and path.name[2:3] == "-":
                taken.setdefault(int(path.name[:2]), f"the notebook {path.name}")
    return taken


def _choose_number(taken: dict[int, str], number: int | None, after: str | None) -> int:
    if number is not None and after is not None:
        raise UsageError("Give either --number or --after, not both.",
                         "--after LAB takes the number right after that lab's notebook.")
    if after is not None:
        before = catalog.get(after).number
        if before is None:
            raise UsageError(f"Lab {after!r} has no notebook, so nothing can come after it.",
                             "Pick the notebook's number with --number.")
        number = before + 1
        where = f"The number right after lab {after!r} ({before:02d}), {number:02d},"
    elif number is not None:
        where = f"Notebook number {number:02d}"
    else:
        number = max(taken, default=-1) + 1
        where = f"The next notebook number, {number:02d},"
    if not 0 <= number <= 99:
        raise UsageError(f"{where} is not between 00 and 99.", _free_hint(taken, 0))
    if number in taken:
        raise UsageError(f"{where} is taken by {taken[number]}.", _free_hint(taken, number))
    return number


def _free_hint(taken: dict[int, str], near: int) -> str:
    decade = range(near // 10 * 10, near // 10 * 10 + 10)
    free = [f"{n:02d}" for n in decade if n not in taken] or [f"{n:02d}" for n in range(100) if n not in taken][:5]
    return f"Pick a free one with --number: {', '.join(free)}." if free else "Every number from 00 to 99 is taken."


def _part_before(number: int) -> str:
    """The part of the lab just before this place in the course: a new lab joins its neighbour's part."""
    earlier = [s for s in catalog.all_labs() if s.number is not None and s.number < number]
    part = str(max(earlier, key=lambda s: s.number or 0).raw.get("part", "I")) if earlier else "I"
    return part if part in PARTS else "I"


# ------------------------------------------------------------------------------------------ writing
def _yaml(value: object) -> str:
    """One YAML value on one line, quoted only where YAML needs it."""
    text = yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=10**6, allow_unicode=True)
    return text.removesuffix("\n").removesuffix("\n...").strip()


def _write_lab(folder: Path, values: dict[str, str], *, part: str, concepts: list[str], after: str | None) -> None:
    (folder / "manifests").mkdir()
    (folder / "exercises").mkdir()
    quoted = {k: _yaml(v) for k, v in values.items()}
    (folder / "lab.yaml").write_text(Template(LAB_YAML).substitute(
        quoted, notebook=_yaml(f"{values['number']}-{values['lab']}.ipynb"), part=_yaml(part),
        concepts=_yaml(list(concepts)), builds_on=_yaml([after] if after else [])))
    (folder / "manifests" / "10-starter.yaml").write_text(Template(MANIFEST).substitute(values))
    (folder / "exercises" / f"{values['exercise']}.py").write_text(Template(EXERCISE_PY).substitute(values))
    (folder / "instructor.md").write_text(Template(INSTRUCTOR).substitute(values))


def _notebook(spec: catalog.LabSpec) -> nbformat.NotebookNode:
    md: Callable[..., nbformat.NotebookNode] = nbformat.v4.new_markdown_cell
    code: Callable[..., nbformat.NotebookNode] = nbformat.v4.new_code_cell
    [exercise] = spec.exercises
    lab, ex = spec.name, exercise.id
    cells = [
        notebook_cells.header_cell(spec),
        md("## The starting state\n\n"
           f"`Lab(\"{lab}\").up()` starts the lab's own cluster and applies the files in `labs/{lab}/manifests/`.\n"
           "Its one manifest creates a ConfigMap called `starter` whose `stage` is `draft`. Read it back:"),
        code("from krmcourse import CheckFailed, Lab\n\n"
             f"lab = Lab(\"{lab}\").up()\n"
             "starter = lab.get(\"configmap\", \"starter\", namespace=\"default\")\n"
             "print(starter[\"data\"])\n"
             "assert starter[\"data\"][\"stage\"] == \"draft\""),
        md(f"## Exercise: {exercise.title}\n\n"
           "Change the ConfigMap `starter` so that it says it is ready. Run the check first: it reads the\n"
           "cluster and says what is still wrong."),
        code("try:\n"
             f"    lab.check(\"{ex}\")\n"
             "except CheckFailed as failed:\n"
             "    print(\"Not solved yet:\", failed)"),
        md(f"Now make the change, in the cell below or in a terminal (`krmcourse kubectl {lab} -- ...`).\n"
           "The hidden cell after yours shows the reference solution; it applies it only when you call\n"
           f"`lab.show_solution(\"{ex}\", apply=True)`."),
        code("# Your turn: change the ConfigMap here (or in a terminal), then run the check below."),
        code(f"lab.show_solution(\"{ex}\")",
             metadata={"jupyter": {"source_hidden": True}, "tags": ["solution"]}),
        code(f"lab.check(\"{ex}\")"),
        md("Take the lab down, so that no process or port is left behind."),
        code("lab.down()\nassert not lab.status()[\"exists\"]"),
        notebook_cells.key_points_cell(spec),
    ]
    metadata = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                "krmcourse": {"concepts": spec.concepts}, "language_info": {"name": "python"}}
    return cast(nbformat.NotebookNode, nbformat.v4.new_notebook(cells=cells, metadata=metadata))


LAB_YAML = """\
title: $title
part: $part
notebook: $notebook
minutes: {teaching: 10, exercises: 5}
concepts: $concepts
builds_on: $builds_on
nodes: 1
questions:
  - What does this lab's starting manifest put in the cluster?
objectives:
  - Change an object that the lab's manifests created, and see the exercise check pass.
keypoints:
  - A lab's manifests give every learner the same starting state, and its check reads the cluster, not the notebook.
exercises:
  - id: $exercise
    title: Mark the starter ConfigMap ready
    minutes: 5
    skill: change a field of a starting object   # the one skill this exercise practises, unique in the course
"""

MANIFEST = """\
# Applied when the lab comes up (files of manifests/ in name order): the starting state of $lab.
apiVersion: v1
kind: ConfigMap
metadata:
  name: starter
  namespace: default
  labels:
    app.kubernetes.io/part-of: krmcourse
data:
  stage: draft
"""

EXERCISE_PY = '''\
"""Exercise: the lab's starter ConfigMap says its stage is ``draft``; make it say ``ready``.

The check reads the ConfigMap from the API server, so it sees whatever the learner changed, from
the notebook, from a terminal, or not at all.
"""

from __future__ import annotations

from collections.abc import Callable

from krmcourse import CheckFailed, Lab

NAME, NAMESPACE = "starter", "default"


def check(lab: Lab) -> None:
    starter = lab.get("configmap", NAME, namespace=NAMESPACE)
    if starter is None:
        raise CheckFailed(f"There is no ConfigMap {NAME!r} in the {NAMESPACE} namespace any more: the lab "
                          "started with one. 'krmcourse reset $lab' brings it back.")
    stage = (starter.get("data") or {}).get("stage")
    if stage != "ready":
        raise CheckFailed(f"The ConfigMap {NAME!r} still gives its stage as {stage!r}, so it is not ready yet.")


def solve(lab: Lab) -> None:
    lab.kubectl("patch", "configmap", NAME, "--namespace", NAMESPACE, "--type=merge",
                "--patch", '{"data": {"stage": "ready"}}')


def _annotate_instead(lab: Lab) -> None:
    """Put the stage in an annotation: the object changes, but not the field that says its stage."""
    lab.kubectl("annotate", "configmap", NAME, "--namespace", NAMESPACE, "--overwrite", "stage=ready")


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {"an annotation instead of the data": _annotate_instead}
'''

INSTRUCTOR = """\
# Instructor notes: $number $title

**Timing.** 10 minutes of talk and demo, 5 minutes for the exercise `$exercise` (the minutes in
lab.yaml; `krmcourse schedule` adds them up).

**What to say.**
- What the lab's manifests put in the cluster, and why the exercise starts from that state.
- Run the check before changing anything, and read its hint.

**Pitfalls.**
- A learner who deletes the starter ConfigMap is told to `krmcourse reset $lab`, which brings it back.
"""
