"""A notebook's first and last cells, written from its lab's ``lab.yaml``.

The first cell states what the Carpentries put at the top of an episode (title, minutes, concept IDs,
objectives, questions) and the last one lists the key points. Writing both from ``lab.yaml`` keeps a
single source for what the schedule, ``krmcourse list`` and the notebook say about a lab.

>>> from krmcourse import catalog, notebook_cells
>>> print(notebook_cells.header(catalog.get("welcome")))   # doctest: +SKIP
# 00 · Welcome to krmcourse
...
"""

from __future__ import annotations

import nbformat

from .catalog import LabSpec


def _bullets(items: list[str]) -> list[str]:
    return [f"- {item}" for item in items]


def header(spec: LabSpec) -> str:
    """The Markdown of the notebook's first cell."""
    number = f"{spec.number:02d} · " if spec.number is not None else ""
    m = spec.minutes
    lines = [f"# {number}{spec.title}", "",
             f"Time: {m['teaching']} min teaching + {m['exercises']} min exercises",
             f"Concepts: {', '.join(spec.concepts) or '-'}"]
    if spec.objectives:
        lines += ["", "**Objectives**", *_bullets(spec.objectives)]
    if spec.questions:
        lines += ["", "**Questions**", *_bullets(spec.questions)]
    return "\n".join(lines)


def key_points(spec: LabSpec) -> str:
    """The Markdown of the notebook's last cell."""
    return "\n".join(["## Key points", "", *_bullets(spec.keypoints)])


def header_cell(spec: LabSpec) -> nbformat.NotebookNode:
    return nbformat.v4.new_markdown_cell(header(spec))


def key_points_cell(spec: LabSpec) -> nbformat.NotebookNode:
    return nbformat.v4.new_markdown_cell(key_points(spec))
