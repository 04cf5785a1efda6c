"""The labs: one folder each under ``labs/``, described by its ``lab.yaml``.

Labs are found by scanning the folder, so an instructor adds a lab by adding a folder.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .errors import UnknownExerciseError, UnknownLabError, UsageError
from .paths import labs_dir

NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
#: A lab's notebook: a two-digit number that sets its place in the course, then a name.
NOTEBOOK = re.compile(r"^(\d{2})-[a-z0-9]+(?:-[a-z0-9]+)*\.ipynb$")
#: A concept ID of the course outline: K2, KP1, G5.
CONCEPT = re.compile(r"^(?:KP|K|C|R|P|A|G|M|E|S)\d+$")
#: Lists of sentences, in the Carpentries' sense: the questions a lab answers, what the learner will be
#: able to do, and what to remember. (Quote a sentence with ": " in it, or YAML reads it as a mapping.)
SENTENCES = ("questions", "objectives", "keypoints")
#: The faults the fault harness (:mod:`krmcourse.faults`) brings upon a declared controller, by the names
#: the README's table gives them; ``faces:`` in a controller's ``converges:`` lists those it must meet.
FAULTS = ("crash mid-reconcile", "API server restart", "watch broken off", "watch ended cleanly", "410 Gone",
          "events 2 s late", "rival writer")


@dataclass(frozen=True)
class ExerciseSpec:
    """One exercise of a lab. ``skill`` names what it practises (a short phrase, one per exercise in the
    course); ``repeats`` is the reason, when there is one, why it practises a skill another exercise
    already does."""

    id: str
    title: str
    minutes: int
    path: Path
    skill: str | None = None
    repeats: str | None = None


@dataclass(frozen=True)
class ControllerSpec:
    """A process the lab runs beside its cluster, declared under ``controllers:`` in ``lab.yaml``.

    ``script`` runs as a plain Python program, or under ``kopf run`` when ``kopf`` is set; with a
    ``serviceaccount`` (``namespace/name``) it gets that identity's credentials instead of the admin's.
    ``ready`` is the log line that says it is serving.
    """

    name: str
    script: Path
    kopf: bool = False
    serviceaccount: str | None = None
    ready: str | None = None
    args: tuple[str, ...] = ()
    converges: Convergence | None = None


@dataclass(frozen=True)
class Wait:
    """``kubectl wait --for=<condition> <resource> -n <namespace>``."""

    resource: str
    condition: str
    namespace: str | None = None


@dataclass(frozen=True)
class Convergence:
    """What a declared controller must bring about, whatever happens to it (``converges:`` in lab.yaml).

    The fault harness (:mod:`krmcourse.faults`) brings the lab to exercise ``at`` (as ``up --at`` does),
    calls ``prepare`` (``module:function`` of the lab's code, given the lab: to start what the controller
    needs beside it, such as the provisioner's cloud; a list it returns becomes the controller's
    arguments, for those made per cluster, such as a webhook's port and certificates), applies
    ``apply`` to give the controller work, and waits until every ``until`` holds. ``rival``, when
    given, is a change another writer makes to a field the controller owns: a merge patch, under its
    own field manager, after which ``until`` must fail until the controller has put its field back.
    ``faces`` names the faults of :data:`FAULTS` that must reach the controller: the harness fails, rather
    than saying "n/a", when one of them cannot (a controller that stopped watching, or never writes).
    """

    apply: Path
    until: tuple[Wait, ...]
    at: str | None = None
    prepare: str | None = None
    rival: dict[str, Any] | None = None
    faces: tuple[str, ...] = ()


@dataclass
class LabSpec:
    name: str
    path: Path
    raw: dict[str, Any] = field(repr=False)

    @property
    def title(self) -> str:
        return str(self.raw.get("title", self.name))

    @property
    def concepts(self) -> list[str]:
        return [str(c) for c in self.raw.get("concepts", [])]

    @property
    def minutes(self) -> dict[str, int]:
        m = self.raw.get("minutes") or {}
        return {"teaching": int(m.get("teaching", 0)), "exercises": int(m.get("exercises", 0))}

    @property
    def nodes(self) -> int:
        return int(self.raw.get("nodes", 1))

    @property
    def notebook(self) -> str | None:
        return self.raw.get("notebook")

    @property
    def number(self) -> int | None:
        """The notebook's number (its place in the course), or None for a lab without a notebook."""
        match = NOTEBOOK.match(self.notebook or "")
        return int(match.group(1)) if match else None

    @property
    def questions(self) -> list[str]:
        return list(self.raw.get("questions") or [])

    @property
    def objectives(self) -> list[str]:
        return list(self.raw.get("objectives") or [])

    @property
    def keypoints(self) -> list[str]:
        return list(self.raw.get("keypoints") or [])

    @property
    def cluster(self) -> dict[str, Any]:
        return dict(self.raw.get("cluster") or {})

    @property
    def manifests(self) -> list[Path]:
        folder = self.path / "manifests"
        if not folder.is_dir():
            return []
        return sorted(p for p in folder.iterdir() if p.suffix in (".yaml", ".yml", ".json"))

    @property
    def exercises(self) -> list[ExerciseSpec]:
        out = []
        for item in self.raw.get("exercises") or []:
            ex_id = str(item["id"])
            out.append(ExerciseSpec(ex_id, str(item.get("title", ex_id)), int(item.get("minutes", 5)),
                                    self.path / "exercises" / f"{ex_id}.py", item.get("skill"), item.get("repeats")))
        return out

    @property
    def controllers(self) -> dict[str, ControllerSpec]:
        out = {}
        for item in self.raw.get("controllers") or []:
            kopf = "kopf" in item
            out[item["name"]] = ControllerSpec(
                item["name"], self.path / item["kopf" if kopf else "script"], kopf, item.get("serviceaccount"),
                item.get("ready"), tuple(str(a) for a in item.get("args") or []),
                self._convergence(item["converges"]) if "converges" in item else None)
        return out

    def _convergence(self, raw: dict[str, Any]) -> Convergence:
        waits = tuple(Wait(w["resource"], w["for"], w.get("namespace")) for w in raw["until"])
        return Convergence(self.path / raw["apply"], waits, raw.get("at"), raw.get("prepare"), raw.get("rival"),
                           tuple(raw.get("faces") or ()))

    def controller(self, name: str) -> ControllerSpec:
        found = self.controllers.get(name)
        if found is None:
            names = ", ".join(self.controllers) or "(none)"
            raise UsageError(f"Lab {self.name!r} declares no controller {name!r}.",
                             f"Its controllers (lab.yaml, 'controllers:') are: {names}.")
        return found

    def exercise(self, ex_id: str) -> ExerciseSpec:
        for ex in self.exercises:
            if ex.id == ex_id:
                return ex
        ids = [e.id for e in self.exercises]
        close = difflib.get_close_matches(ex_id, ids, n=1)
        raise UnknownExerciseError(
            f"Lab {self.name!r} has no exercise {ex_id!r}.",
            (f"Did you mean {close[0]!r}? " if close else "")
            + f"Its exercises are: {', '.join(ids) or '(none)'} (krmcourse exercises {self.name}).")


def load(path: Path) -> LabSpec:
    """Read one lab folder; a broken lab.yaml is reported with its path."""
    try:
        raw = yaml.safe_load((path / "lab.yaml").read_text()) or {}
    except yaml.YAMLError as exc:
        raise UsageError(f"{path / 'lab.yaml'} is not valid YAML: {exc}", "Fix the file and try again.") from exc
    if not isinstance(raw, dict):
        raise UsageError(f"{path / 'lab.yaml'} must be a mapping.", "See labs/README.md for the format.")
    _validate(path / "lab.yaml", raw)
    return LabSpec(path.name, path, raw)


def _validate(where: Path, raw: dict[str, Any]) -> None:
    """The fields that the notebook's generated cells and the course order rely on."""
    for key in SENTENCES:
        items = raw.get(key)
        if items is None:
            continue
        if not isinstance(items, list) or not all(isinstance(i, str) and i.strip() for i in items):
            raise UsageError(f"{where}: '{key}' must be a list of sentences.",
                             f"Write each one as a '- ' item under '{key}:', in quotes if it contains ': ' "
                             "(see labs/README.md).")
    wrong = [str(c) for c in raw.get("concepts") or [] if not CONCEPT.match(str(c))]
    if wrong:
        raise UsageError(f"{where}: not concept IDs of the course outline: {', '.join(wrong)}.",
                         "Use IDs such as K2, P5 or KP1 (the README's table of parts lists them).")
    minutes = raw.get("minutes")
    if minutes is not None and not (isinstance(minutes, dict) and set(minutes) <= {"teaching", "exercises"}
                                    and all(isinstance(v, int) and v >= 0 for v in minutes.values())):
        raise UsageError(f"{where}: 'minutes' must give whole minutes for teaching and exercises, not {minutes!r}.",
                         "Write it as: minutes: {teaching: 20, exercises: 15}")
    exercises = raw.get("exercises") or []
    if not isinstance(exercises, list):
        raise UsageError(f"{where}: 'exercises' must be a list.", "Write each as '- id: <name>' with a title.")
    for item in exercises:
        if not (isinstance(item, dict) and isinstance(item.get("id"), str) and NAME.match(item["id"])):
            raise UsageError(f"{where}: exercise {item!r} needs an 'id' of lowercase words joined by hyphens.",
                             "Write it as '- id: fix-the-spec', with 'title:' and 'minutes:' under it.")
        if not isinstance(item.get("minutes", 5), int):
            raise UsageError(f"{where}: exercise {item['id']}'s 'minutes' must be a whole number, "
                             f"not {item['minutes']!r}.", "For example: minutes: 5")
        for key, example in (("skill", "skill: read a False condition to find the faulty spec field"),
                             ("repeats", "repeats: the same rule on a whole spec, where status must stay writable")):
            if key in item and not (isinstance(item[key], str) and item[key].strip()):
                raise UsageError(f"{where}: exercise {item['id']}'s '{key}' must be a short phrase, "
                                 f"not {item[key]!r}.", f"For example: {example}")
        if "repeats" in item and "skill" not in item:
            raise UsageError(f"{where}: exercise {item['id']} gives 'repeats' but no 'skill'.",
                             "Name the skill it repeats under 'skill:', and keep the reason under 'repeats:'.")
    _validate_controllers(where, raw.get("controllers") or [])
    notebook = raw.get("notebook")
    if notebook is not None and not NOTEBOOK.match(str(notebook)):
        raise UsageError(f"{where}: notebook {notebook!r} is not named NN-<name>.ipynb.",
                         "Give it a two-digit number and the lab's name, e.g. 12-composite.ipynb.")


def _validate_controllers(where: Path, controllers: Any) -> None:
    example = ("Write each as '- name: provisioner', then 'kopf: controllers/provisioner.py' (or 'script:'), "
               "and optionally 'serviceaccount: krm-system/provisioner', 'ready: <log line>', 'args: [...]' "
               "(see labs/README.md).")
    if not isinstance(controllers, list):
        raise UsageError(f"{where}: 'controllers' must be a list.", example)
    for item in controllers:
        if not (isinstance(item, dict) and isinstance(item.get("name"), str) and NAME.match(item["name"])):
            raise UsageError(f"{where}: controller {item!r} needs a 'name' of lowercase words joined by hyphens.",
                             example)
        what = f"{where}: controller {item['name']}"
        runs = [k for k in ("script", "kopf") if k in item]
        if len(runs) != 1:
            raise UsageError(f"{what} must name one program, as 'script:' or as 'kopf:'.", example)
        account = item.get("serviceaccount")
        if account is not None and not (isinstance(account, str) and account.count("/") == 1):
            raise UsageError(f"{what}: 'serviceaccount' must be written namespace/name, not {account!r}.", example)
        unknown = set(item) - {"name", "script", "kopf", "serviceaccount", "ready", "args", "converges"}
        if unknown:
            raise UsageError(f"{what}: unknown field(s) {', '.join(sorted(unknown))}.", example)
        if "converges" in item:
            _validate_convergence(what, item["converges"])


def _validate_convergence(what: str, raw: Any) -> None:
    example = ("Write it as 'converges:' with 'apply: faults/<file>.yaml' and 'until:' a list of "
               "{resource: kind/name, namespace: ns, for: condition=Ready}; optionally 'at: <exercise>', "
               "'prepare: <module>:<function>' and "
               "'rival: {resource: kind/name, namespace: ns, patch: {...}, subresource: status}' "
               "and 'faces: [API server restart, ...]' (see labs/README.md).")
    if not (isinstance(raw, dict) and isinstance(raw.get("apply"), str) and isinstance(raw.get("until"), list)
            and raw["until"] and set(raw) <= {"apply", "until", "at", "prepare", "rival", "faces"}):
        raise UsageError(f"{what}: 'converges' needs 'apply' and a non-empty 'until', and nothing else.", example)
    for wait in raw["until"]:
        if not (isinstance(wait, dict) and isinstance(wait.get("resource"), str) and isinstance(wait.get("for"), str)
                and set(wait) <= {"resource", "namespace", "for"}):
            raise UsageError(f"{what}: each 'until' entry needs 'resource' and 'for' (and may give 'namespace'), "
                             f"not {wait!r}.", example)
    rival = raw.get("rival")
    if rival is not None and not (isinstance(rival, dict) and isinstance(rival.get("resource"), str)
                                  and isinstance(rival.get("patch"), dict)
                                  and set(rival) <= {"resource", "namespace", "patch", "subresource"}):
        raise UsageError(f"{what}: 'rival' needs 'resource' and a 'patch' mapping, not {rival!r}.", example)
    faces = raw.get("faces", [])
    if not (isinstance(faces, list) and all(f in FAULTS for f in faces) and len(set(faces)) == len(faces)):
        raise UsageError(f"{what}: 'faces' must list faults, each once, from: {', '.join(FAULTS)}; not {faces!r}.",
                         example)
    if "rival writer" in faces and rival is None:
        raise UsageError(f"{what}: it faces a 'rival writer', but declares no 'rival' for one to write.", example)


def names(root: Path | None = None) -> list[str]:
    root = root or labs_dir()
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / "lab.yaml").is_file() and NAME.match(p.name))


def all_labs(root: Path | None = None) -> list[LabSpec]:
    """Every lab, in course order (the notebook's number, then the name)."""
    root = root or labs_dir()
    labs = [load(root / n) for n in names(root)]
    return sorted(labs, key=lambda s: (s.notebook or "zz", s.name))


def get(name: str, root: Path | None = None) -> LabSpec:
    root = root or labs_dir()
    known = names(root)
    if name not in known:
        close = difflib.get_close_matches(name, known, n=1)
        raise UnknownLabError(
            f"There is no lab called {name!r}.",
            (f"Did you mean {close[0]!r}? " if close else "") + "Run 'krmcourse list' to see the labs.")
    return load(root / name)


def skill_problems(labs: list[LabSpec]) -> list[str]:
    """What is wrong with the skills the exercises of ``labs`` declare: an exercise that names none, and a
    skill that several exercises practise when more than one of them gives no reason (``repeats:``).

    Skills are compared without regard to case or spacing. An empty list means every exercise practises
    its own skill, or repeats one on purpose and says why.
    """
    problems: list[str] = []
    by_skill: dict[str, list[tuple[str, ExerciseSpec]]] = {}
    for spec in labs:
        for ex in spec.exercises:
            if not ex.skill:
                problems.append(f"labs/{spec.name}/lab.yaml: exercise {ex.id} names no skill. Add 'skill:', a short "
                                "phrase for what it practises (labs/README.md).")
                continue
            by_skill.setdefault(" ".join(ex.skill.lower().split()), []).append((spec.name, ex))
    for found in by_skill.values():
        unexplained = [f"{lab}/{ex.id}" for lab, ex in found if not (ex.repeats and ex.repeats.strip())]
        if len(found) > 1 and len(unexplained) > 1:
            problems.append(f"{len(found)} exercises practise the skill {found[0][1].skill!r} "
                            f"({', '.join(f'{lab}/{ex.id}' for lab, ex in found)}), and "
                            f"{', '.join(unexplained)} give no reason. Name what each really practises, or "
                            "say under 'repeats:' why one practises it again (labs/README.md).")
    return problems
