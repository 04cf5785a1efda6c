"""Exercise: make a SeedTray that does what the task asks, in the units its own schema documents.

``krm_reflect.seed_tray`` defines the SeedTray kind. Its three spec fields are plain numbers, and the
unit of each (hours, minutes or seconds of light; degrees Celsius, Fahrenheit or kelvins; millilitres,
centilitres or decilitres of water) is drawn for this lab and written only into the field's description
in the CRD's schema. ``kubectl explain`` shows those descriptions, read from the OpenAPI v3 document the
API server publishes. The numbers of the task as a person says them (16 hours, 25 degrees, half a litre)
are always wrong for at least one field, and the server accepts any of them, so only reading the schema
gives the right ones. The check compares with the draw kept in the lab's state folder, and refuses a CRD
whose descriptions were edited to fit other numbers. It says how many fields are wrong, never which.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from krmcourse import CheckFailed, Lab


def _same(value: Any, wanted: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and abs(value - wanted) <= 0.5


def check(lab: Lab) -> None:
    ref = lab.support("krm_reflect")
    units = ref.tray_units(lab)
    if units is None or lab.get("crd", ref.TRAYS) is None:
        raise CheckFailed("The SeedTray kind is not defined yet: run the notebook's cell that calls "
                          "krm_reflect.seed_tray(lab).")
    if ref.documented_units(lab) != units:
        raise CheckFailed(
            "The SeedTray CRD's field descriptions are not the ones it was defined with: someone edited "
            "its documentation. Define it again as it was with krm_reflect.seed_tray(lab), and fit the "
            "values to the documentation, not the documentation to the values.")
    tray = lab.get(ref.TRAYS, ref.TRAY, ref.NAMESPACE)
    if tray is None:
        raise CheckFailed(f"There is no SeedTray called {ref.TRAY} in {ref.NAMESPACE} yet.")
    spec = tray.get("spec") or {}
    wanted = ref.tray_values(units)
    wrong = [field for field in wanted if not _same(spec.get(field), wanted[field])]
    if wrong:
        raise CheckFailed(
            f"{len(wrong)} of the {len(wanted)} fields of {ref.TRAY} would not give the seedlings what the "
            "task asks. Each field is a bare number; what it counts is written in the SeedTray's own "
            "schema: kubectl explain seedtrays.spec (or the group's OpenAPI v3 document) shows it.")


def solve(lab: Lab) -> None:
    ref = lab.support("krm_reflect")
    ref.seed_tray(lab)  # defined as drawn (again, if its descriptions were edited)
    wire = lab.support("krm_wire")

    def units_published() -> dict[str, str] | None:
        """Each field's unit, as the OpenAPI v3 document that kubectl explain reads describes it now."""
        reply = raw.get(f"/openapi/v3/apis/{ref.TRAY_GROUP}/v1")
        schema = (reply.body.get("components", {}).get("schemas", {}) if reply.status == 200 else {}).get(
            "dev.krmcourse.nursery.v1.SeedTray", {})
        fields = schema.get("properties", {}).get("spec", {}).get("properties", {})
        said = {f: next((u for u in ref.UNITS[f] if fields.get(f, {}).get("description") == ref.describe(f, u)), None)
                for f in ref.UNITS}
        return said if said == ref.documented_units(lab) else None  # the document catches up with the CRD

    with wire.RawClient(lab.kubeconfig) as raw:
        units = lab.wait_until(units_published, timeout=60, message="the SeedTray schema was not published")
    lab.apply({"apiVersion": f"{ref.TRAY_GROUP}/v1", "kind": "SeedTray",
               "metadata": {"name": ref.TRAY, "namespace": ref.NAMESPACE},
               "spec": {field: ref.UNITS[field][unit][1] for field, unit in units.items()}})


def _the_numbers_as_said(lab: Lab) -> None:
    """16, 25 and 500, as the task says them, without reading what each field counts."""
    ref = lab.support("krm_reflect")
    ref.seed_tray(lab)
    lab.apply({"apiVersion": f"{ref.TRAY_GROUP}/v1", "kind": "SeedTray",
               "metadata": {"name": ref.TRAY, "namespace": ref.NAMESPACE},
               "spec": {field: amount for field, (amount, _) in ref.WANTED.items()}})


def _the_documentation_fitted_to_the_numbers(lab: Lab) -> None:
    """Then the CRD's descriptions rewritten to the units those numbers are in."""
    ref = lab.support("krm_reflect")
    crd = lab.get("crd", ref.TRAYS)
    assert crd is not None
    fields = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    patch = [{"op": "replace", "path": f"/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/{field}"
              "/description", "value": ref.describe(field, unit)} for field, (_, unit) in ref.WANTED.items()
             if field in fields]
    lab.kubectl("patch", "crd", ref.TRAYS, "--type=json", "-p", json.dumps(patch))


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "the task's numbers as a person says them": _the_numbers_as_said,
    "the CRD's descriptions rewritten to fit those numbers": _the_documentation_fitted_to_the_numbers,
}
