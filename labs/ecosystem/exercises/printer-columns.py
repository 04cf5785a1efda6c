"""Exercise: give the VolumeBackup CRD printer columns, so the live feature analysis finds them.

The check runs the same analysis the notebook runs on the dataset (krmcourse.ecosystem.live_kinds) on
the lab's API server, so it sees what the server stored, not what a file on disk says.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from krmcourse import CheckFailed, Lab
from krmcourse.ecosystem import live_kinds

GROUP = "eco.krmcourse.dev"
KIND = "VolumeBackup"


def check(lab: Lab) -> None:
    kinds = live_kinds(lab)
    volume_backup = kinds[(kinds["group"] == GROUP) & (kinds["kind"] == KIND)]
    if volume_backup.empty:
        raise CheckFailed(
            f"The cluster serves no {KIND} kind in {GROUP}: was its CRD deleted? "
            "`krmcourse reset ecosystem` brings it back."
        )
    if int(volume_backup["printer_columns"].max()) == 0:
        raise CheckFailed(
            f"The live analysis finds no printer columns on any served version of {KIND}: "
            "`kubectl get volumebackups` still shows only NAME and AGE. Columns written where a CRD has no such field "
            "are dropped by the API server (kubectl patch only warns): lab.get('crd', ...) shows what it kept."
        )
    crd = lab.get("customresourcedefinition", f"volumebackups.{GROUP}") or {}
    paths = [
        column.get("jsonPath", "")
        for version in crd.get("spec", {}).get("versions", [])
        for column in version.get("additionalPrinterColumns") or []
    ]
    if not any(path.startswith((".spec", ".status")) for path in paths):
        raise CheckFailed(
            f"{KIND}'s printer columns only show metadata; none reads a field of spec or status."
        )


def solve(lab: Lab) -> None:
    lab.apply(lab.path / "exercises" / "printer-columns.solution.yaml")
    lab.wait_for(f"customresourcedefinition/volumebackups.{GROUP}", "condition=Established", timeout=60)


def _patch_volumebackup_crd(lab: Lab, path: str, columns: list[dict[str, str]]) -> None:
    """Add printer columns at ``path`` of the VolumeBackup CRD with a JSON patch."""
    ops = [{"op": "add", "path": path, "value": columns}]
    lab.kubectl("patch", "crd", f"volumebackups.{GROUP}", "--type=json", "-p", json.dumps(ops))


def _columns_beside_the_versions(lab: Lab) -> None:
    """Put the columns under spec, where the old v1beta1 CRDs had them: the server drops the unknown field."""
    _patch_volumebackup_crd(lab, "/spec/additionalPrinterColumns",
                      [{"name": "Source", "type": "string", "jsonPath": ".spec.source"}])


def _only_an_age_column(lab: Lab) -> None:
    """Copy the usual Age column from a tutorial: a printer column, but one that shows nothing of the VolumeBackup."""
    _patch_volumebackup_crd(lab, "/spec/versions/0/additionalPrinterColumns",
                      [{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}])


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "columns beside the versions, as in v1beta1": _columns_beside_the_versions,
    "only an Age column": _only_an_age_column,
}
