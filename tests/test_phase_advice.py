"""Notebook 02 advises conditions over `status.phase` for new APIs; the labs must follow it, or say why not.

A lab whose CRD schema declares `status.phase` passes only if its notebook has a Markdown cell with
MARKER followed by the reason, in a sentence or two (as a state machine that is the point of the
API, like Metal3's `provisioning.state`). No cluster needed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from krmcourse import catalog

ROOT = Path(__file__).resolve().parent.parent
#: What a notebook writes, in a Markdown cell, before its reason for keeping a phase.
MARKER = "Why this API keeps `status.phase`:"
#: Labs that still declare `status.phase` without saying why; each is a bug to fix, not an exemption to
#: grow. The test fails when one of them no longer declares it, so the list can only shrink.
NOT_YET_FOLLOWING = {
    "ecosystem": "its copy of the claims CRDs predates the claims lab's Bound condition",
    "writes-and-caches": "its Widget CRD predates the good-citizens lab's Ready condition",
}


def phase_crds(lab: catalog.LabSpec) -> list[str]:
    """The CRDs among the lab's manifests whose schema, in any version, has `status.phase`."""
    found = []
    for path in lab.manifests:
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc or doc.get("kind") != "CustomResourceDefinition":
                continue
            for version in doc["spec"].get("versions", []):
                schema = (version.get("schema") or {}).get("openAPIV3Schema") or {}
                status = schema.get("properties", {}).get("status", {})
                if "phase" in status.get("properties", {}):
                    found.append(f"{path.name}: {doc['metadata']['name']} {version['name']}")
    return found


def explains_phase(notebook: Path) -> bool:
    """True when a Markdown cell has MARKER followed by at least a short sentence."""
    for cell in json.loads(notebook.read_text())["cells"]:
        text = "".join(cell.get("source", ""))
        if cell["cell_type"] == "markdown" and MARKER in text:
            return len(text.split(MARKER, 1)[1].strip()) >= 40
    return False


def unexplained(root: Path) -> dict[str, list[str]]:
    """Labs under ``root``/labs that declare `status.phase` and whose notebook does not say why."""
    out = {}
    for lab in catalog.all_labs(root / "labs"):
        crds = phase_crds(lab)
        notebook = root / "notebooks" / (lab.notebook or "")
        if crds and not (lab.notebook and notebook.is_file() and explains_phase(notebook)):
            out[lab.name] = crds
    return out


def test_every_status_phase_is_explained_in_its_notebook() -> None:
    missing = {name: crds for name, crds in unexplained(ROOT).items() if name not in NOT_YET_FOLLOWING}
    assert not missing, (
        f"These labs declare status.phase but their notebooks do not say why: {missing}. Report with "
        f"conditions instead (notebook 02), or add a Markdown cell with {MARKER!r} and the reason."
    )


@pytest.mark.parametrize("name", sorted(NOT_YET_FOLLOWING))
def test_the_list_of_labs_not_yet_following_is_current(name: str) -> None:
    lab = catalog.get(name, ROOT / "labs")
    assert phase_crds(lab), f"{name} no longer declares status.phase: remove it from NOT_YET_FOLLOWING."
