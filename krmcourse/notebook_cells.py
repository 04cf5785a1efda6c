"""A notebook's first and last cells, written from its lab's ``lab.yaml``.

The first cell states what the Carpentries put at the top of an episode (title, minutes, concept IDs,
objectives, questions) and the last one lists the key points. Writing both from ``lab.yaml`` keeps a
single source for what the schedule, ``krmcourse list`` and the notebook say about a lab.

The first cell has three parts: the generated title, time and concepts; then the author's own prose,
which is kept as it is; then the generated objectives and questions. The last cell is generated whole.
``krmcourse sync-notebooks`` rewrites both from ``lab.yaml`` (:func:`sync`), and ``--check`` only
reports which fields differ (:func:`differences`).

>>> from krmcourse import catalog, notebook_cells
>>> print(notebook_cells.header(catalog.get("welcome")))   # doctest: +SKIP
# 00 · Welcome to krmcourse
...
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, cast

import nbformat

from . import catalog
from .catalog import LabSpec
from .errors import UsageError
from .paths import notebooks_dir

#: The headings of the generated lists under the prose, in the order they are written.
SECTIONS = {"objectives": "**Objectives**", "questions": "**Questions**"}
KEY_POINTS = "## Key points"
#: The fields :func:`differences` names: the first cell's, then the last cell's, then the metadata's.
FIELDS = ("title", "minutes", "concepts", *SECTIONS, "layout", "key points", "metadata concepts")
#: Bullets wrap at this width, as the notebooks' prose does, so that the Markdown reads well in the editor too.
WIDTH = 110
#: Words that would open a new Markdown block (a list, a heading, a quote...) at the start of a wrapped line.
_OPENS_BLOCK = re.compile(r"^(?:[-+*>#=<|~]|`{3}|\d+[.)])")


def _bullets(items: list[str]) -> list[str]:
    """Each item as a Markdown bullet, wrapped with a two-space indent and never before a block opener."""
    lines = []
    for item in items:
        line = "-"
        for word in item.split():
            if len(line) + 1 + len(word) > WIDTH and line != "-" and not _OPENS_BLOCK.match(word):
                lines.append(line)
                line = " "
            line += " " + word
        lines.append(line)
    return lines


def _top(spec: LabSpec) -> dict[str, str]:
    number = f"{spec.number:02d} · " if spec.number is not None else ""
    m = spec.minutes
    return {"title": f"# {number}{spec.title}",
            "minutes": f"Time: {m['teaching']} min teaching + {m['exercises']} min exercises",
            "concepts": f"Concepts: {', '.join(spec.concepts) or '-'}"}


def _sections(spec: LabSpec) -> dict[str, str]:
    items = {"objectives": spec.objectives, "questions": spec.questions}
    return {key: "\n".join([SECTIONS[key], *_bullets(items[key])]) for key in SECTIONS if items[key]}


def header(spec: LabSpec, prose: str = "") -> str:
    """The Markdown of the notebook's first cell, with ``prose`` between the concepts and the objectives."""
    parts = [*_top(spec).values(), prose.strip("\n"), *_sections(spec).values()]
    return "\n\n".join(part for part in parts if part)


def key_points(spec: LabSpec) -> str:
    """The Markdown of the notebook's last cell."""
    return "\n".join([KEY_POINTS, "", *_bullets(spec.keypoints)])


def header_cell(spec: LabSpec) -> nbformat.NotebookNode:
    return cast(nbformat.NotebookNode, nbformat.v4.new_markdown_cell(header(spec)))


def key_points_cell(spec: LabSpec) -> nbformat.NotebookNode:
    return cast(nbformat.NotebookNode, nbformat.v4.new_markdown_cell(key_points(spec)))


# ------------------------------------------------------------------------------------- reading back
def _parts(first: str, where: str = "the notebook") -> tuple[dict[str, str], str]:
    """A first cell taken apart: its generated fields, and the prose between them.

    Text anywhere else than between the ``Concepts:`` line and the first generated list would be lost
    when the cell is written again, so it is refused with the place to move it to.
    """
    lines = first.split("\n")
    concepts = next((i for i, line in enumerate(lines) if line.startswith("Concepts:")), len(lines))
    fields = {"title": lines[0]} if lines[0].startswith("# ") else {}
    for line in lines[1:concepts + 1]:
        if line.startswith("Time:"):
            fields["minutes"] = line
        elif line.startswith("Concepts:"):
            fields["concepts"] = line
        elif line.strip():
            raise UsageError(f"{where}: the first cell has text between its title and its 'Concepts:' line: "
                             f"{line.strip()[:60]!r}.", "Move it below the 'Concepts:' line, where the prose goes.")
    heads = [i for i in range(concepts + 1, len(lines)) if lines[i] in SECTIONS.values()]
    for at, end in zip(heads, [*heads[1:], len(lines)], strict=True):
        section = "\n".join(lines[at:end]).strip("\n").split("\n")
        stray = [line for line in section[1:] if line.strip() and not line.startswith(("- ", "  "))]
        if stray:
            raise UsageError(f"{where}: the first cell has text after its {lines[at]} list: {stray[0][:60]!r}.",
                             f"Move it above {next(iter(SECTIONS.values()))}, where the prose goes.")
        key = next(k for k, v in SECTIONS.items() if v == lines[at])
        fields.setdefault(key, "\n".join(section))
    prose = "\n".join(lines[concepts + 1:heads[0] if heads else len(lines)]).strip("\n")
    return fields, prose


def _source(cell: dict[str, Any]) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def _cells(nb: dict[str, Any], where: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The notebook's first and last cells, when they are the Markdown cells that sync may rewrite."""
    cells = nb.get("cells") or []
    first, last = (cells[0], cells[-1]) if len(cells) > 1 else ({}, {})
    if first.get("cell_type") != "markdown" or not _source(first).startswith("# ") \
            or "\nConcepts:" not in _source(first):
        raise UsageError(f"{where}: the first cell is not a Markdown cell with a '# ' title and a 'Concepts:' "
                         "line, so sync cannot tell the generated part from the prose.",
                         "Start the notebook with a Markdown cell of two lines, '# Title' and 'Concepts:', "
                         "then run 'krmcourse sync-notebooks'.")
    if last.get("cell_type") != "markdown" or not _source(last).startswith(KEY_POINTS):
        raise UsageError(f"{where}: the last cell is not a Markdown cell that starts with '{KEY_POINTS}'.",
                         f"End the notebook with a Markdown cell whose first line is '{KEY_POINTS}', then "
                         "run 'krmcourse sync-notebooks': it writes the key points from lab.yaml.")
    return first, last


def differences(spec: LabSpec, nb: dict[str, Any], where: str = "the notebook") -> list[str]:
    """The fields (see :data:`FIELDS`) in which the notebook's generated parts differ from ``lab.yaml``."""
    first, last = (_source(c) for c in _cells(nb, where))
    stored, text = _parts(first, where)
    wanted = {**_top(spec), **_sections(spec)}
    found = [key for key in ("title", "minutes", "concepts", *SECTIONS) if wanted.get(key) != stored.get(key)]
    if not found and first != header(spec, text):
        found.append("layout")  # every field is right, but not in the generated order or spacing
    if last != key_points(spec):
        found.append("key points")
    meta = (nb.get("metadata") or {}).get("krmcourse") or {}
    if "concepts" in meta and meta["concepts"] != spec.concepts:
        found.append("metadata concepts")
    return found


def synced(spec: LabSpec, nb: dict[str, Any], where: str = "the notebook") -> dict[str, Any]:
    """The notebook with its first and last cells written from ``lab.yaml``; ids, metadata and prose kept."""
    first, last = _cells(nb, where)
    for cell, text in ((first, header(spec, _parts(_source(first), where)[1])), (last, key_points(spec))):
        cell["source"] = text.splitlines(keepends=True)  # as nbformat stores it: one string per line
    meta = (nb.get("metadata") or {}).get("krmcourse")
    if isinstance(meta, dict) and "concepts" in meta:
        meta["concepts"] = spec.concepts
    return nb


def sync(spec: LabSpec, path: Path, *, check: bool = False) -> list[str]:
    """Rewrite ``path`` from ``lab.yaml`` if it differs (unless ``check``); return the fields that differed.

    The file keeps the course's JSON layout (one-space indent, UTF-8 as is), so a sync that changes
    nothing writes nothing, and one that changes a field changes only those lines in git.
    """
    where = str(path)
    nb = json.loads(path.read_text())
    found = differences(spec, nb, where)
    if found and not check:
        path.write_text(json.dumps(synced(spec, nb, where), indent=1, ensure_ascii=False) + "\n")
    return found


def sync_all(*, check: bool = False) -> dict[Path, list[str]]:
    """:func:`sync` every lab's notebook; the notebooks that differed, with the fields that did."""
    out: dict[Path, list[str]] = {}
    for spec in catalog.all_labs():
        if not spec.notebook:
            continue
        path = notebooks_dir() / spec.notebook
        if not path.is_file():
            raise UsageError(f"Lab {spec.name} names the notebook {spec.notebook}, which is not in {notebooks_dir()}.",
                             f"Fix 'notebook:' in {spec.path / 'lab.yaml'}, or write the notebook "
                             "('krmcourse new-lab' writes a lab together with its notebook).")
        found = sync(spec, path, check=check)
        if found:
            out[path] = found
    return out
