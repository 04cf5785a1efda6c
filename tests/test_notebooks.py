"""The notebook conventions: clean in git, objectives/time/concepts first, key points last, a lab per
notebook, and every concept of the course outline taught somewhere."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from krmcourse import catalog

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))

# The concept IDs of the course outline (Parts I-VI).
OUTLINE = ([f"K{i}" for i in range(1, 11)] + [f"C{i}" for i in range(1, 8)] + [f"R{i}" for i in range(1, 5)]
           + [f"P{i}" for i in range(1, 6)] + [f"KP{i}" for i in range(1, 6)] + [f"A{i}" for i in range(1, 5)]
           + [f"G{i}" for i in range(1, 7)] + ["M1"] + [f"E{i}" for i in range(1, 6)])


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def source(cell: dict) -> str:
    return "".join(cell.get("source", ""))


def declared(nb: dict) -> set[str]:
    head = json.dumps(nb.get("metadata", {})) + "".join(source(c) for c in nb["cells"][:2])
    return set(re.findall(r"\b(?:KP|K|C|R|P|A|G|M|E)\d+\b", head))


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
