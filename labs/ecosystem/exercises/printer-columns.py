"""Exercise: give the Backup CRD printer columns, so the live feature analysis finds them.

The check runs the same analysis the notebook runs on the dataset (krmcourse.ecosystem.live_kinds) on
the lab's API server, so it sees what the server stored, not what a file on disk says.
"""

from __future__ import annotations

from krmcourse import CheckFailed, Lab
from krmcourse.ecosystem import live_kinds

GROUP = "eco.krmcourse.dev"
KIND = "Backup"


def check(lab: Lab) -> None:
    kinds = live_kinds(lab)
    backup = kinds[(kinds["group"] == GROUP) & (kinds["kind"] == KIND)]
    if backup.empty:
        raise CheckFailed(
            f"The cluster serves no {KIND} kind in {GROUP}: was its CRD deleted? "
            "`krmcourse reset ecosystem` brings it back."
        )
    if int(backup["printer_columns"].max()) == 0:
        raise CheckFailed(
            f"The live analysis finds no printer columns on any served version of {KIND}: "
            "`kubectl get backups` still shows only NAME and AGE."
        )
    crd = lab.get("customresourcedefinition", f"backups.{GROUP}") or {}
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
    lab.wait_for(f"customresourcedefinition/backups.{GROUP}", "condition=Established", timeout=60)
