"""Kinds that nothing on the page describes, made when a learner opens an exercise (K5, K9).

``new_kind`` defines a CRD whose group, version, kind and plural are drawn at random: only discovery
can tell a client what it is called and where it lives. ``seed_tray`` defines the SeedTray kind, whose
fields take units drawn at random and written only into its schema's descriptions: only ``kubectl
explain`` (or the OpenAPI v3 document it reads) says what a number in them means. Each draw is kept in
the lab's state folder, so the checks compare the cluster with what was drawn, not with what the CRD
says now.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import Any

from krmcourse import Lab

NAMESPACE = "model"
DRAWN_FOR = "krmcourse.dev/drawn-for"  # label on each CRD made here: which exercise it belongs to

# Kinds whose plural is not the kind with an "s": a client that guesses the plural asks the wrong URL.
KINDS = [("Cactus", "cacti"), ("Fungus", "fungi"), ("Leaf", "leaves"), ("Larva", "larvae"),
         ("Mouse", "mice"), ("Goose", "geese"), ("Ivy", "ivies"), ("Radish", "radishes"),
         ("Potato", "potatoes"), ("Cherry", "cherries")]
GROUP_WORDS = ["greenhouse", "orchard", "allotment", "meadow", "hedgerow", "potting-shed"]
VERSIONS = ["v1", "v1beta1", "v1alpha2", "v2"]
FIRST = "first"  # the name the learner gives the first object of the new kind


@dataclass(frozen=True)
class NewKind:
    group: str
    version: str
    kind: str
    plural: str

    @property
    def resource(self) -> str:
        """The name kubectl and lab.get accept for it: ``<plural>.<group>``."""
        return f"{self.plural}.{self.group}"

    def __str__(self) -> str:
        return f"A new API group is served: {self.group}. Nothing on this page names its kinds."


def _draw_path(lab: Lab, name: str) -> Any:
    return lab.home / f"{name}.json"


def _load(lab: Lab, name: str) -> dict[str, Any] | None:
    path = _draw_path(lab, name)
    return json.loads(path.read_text()) if path.is_file() else None


def _save(lab: Lab, name: str, draw: dict[str, Any]) -> None:
    path = _draw_path(lab, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(draw))


def _crd(group: str, kind: str, plural: str, version: str, spec_schema: dict[str, Any],
         exercise: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}", "labels": {DRAWN_FOR: exercise}},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": f"{kind}List"},
                 "versions": [{"name": version, "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                     "type": "object", "properties": {"spec": spec_schema}}}}]},
    }


def _define(lab: Lab, crd: dict[str, Any]) -> None:
    lab.apply(crd)
    lab.wait_for(f"crd/{crd['metadata']['name']}", "condition=Established", timeout=60)


# --------------------------------------------------------------------------- K5: a kind no client has seen
def drawn_kind(lab: Lab) -> NewKind | None:
    """The kind ``new_kind`` drew for this lab, or None before it was drawn."""
    draw = _load(lab, "unseen-kind")
    return NewKind(**draw) if draw else None


def new_kind(lab: Lab) -> NewKind:
    """Define (once per lab) a CRD with a random group, version, kind and plural, and say only its group."""
    drawn = drawn_kind(lab)
    if drawn is None:
        kind, plural = secrets.choice(KINDS)
        drawn = NewKind(group=f"{secrets.choice(GROUP_WORDS)}-{secrets.token_hex(2)}.krmcourse.dev",
                        version=secrets.choice(VERSIONS), kind=kind, plural=plural)
        _save(lab, "unseen-kind", drawn.__dict__)
    spec = {"type": "object", "required": ["note"],
            "properties": {"note": {"type": "string", "minLength": 1, "description": "Anything you like."}}}
    crd = _crd(drawn.group, drawn.kind, drawn.plural, drawn.version, spec, "unseen-kind")
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["required"] = ["spec"]
    _define(lab, crd)
    return drawn


# --------------------------------------------------------------------------- K9: units only the schema gives
TRAY_GROUP = "nursery.krmcourse.dev"
TRAYS = f"seedtrays.{TRAY_GROUP}"
TRAY = "tomatoes"
#: The task, in the units a person would say it in; each field's own unit is drawn.
WANTED = {"light": (16, "hours"), "warmth": (25, "celsius"), "water": (500, "millilitres")}
UNITS: dict[str, dict[str, tuple[str, Any]]] = {
    # field -> unit -> (what its description says, the task's value in that unit)
    "light": {"hours": ("in hours", 16), "minutes": ("in minutes", 960), "seconds": ("in seconds", 57600)},
    "warmth": {"celsius": ("in degrees Celsius", 25), "fahrenheit": ("in degrees Fahrenheit", 77),
               "kelvins": ("in kelvins (0 degrees Celsius is 273.15 K)", 298.15)},
    "water": {"millilitres": ("in millilitres", 500), "centilitres": ("in centilitres", 50),
              "decilitres": ("in decilitres", 5)},
}
WHAT = {"light": "How long the grow lamps shine each day, {unit}.",
        "warmth": "The temperature the heating mat holds, {unit}.",
        "water": "Water given to the whole tray each morning, {unit}."}
TYPES = {"light": "integer", "warmth": "number", "water": "integer"}


def describe(field: str, unit: str) -> str:
    return WHAT[field].format(unit=UNITS[field][unit][0])


def tray_units(lab: Lab) -> dict[str, str] | None:
    """The unit drawn for each SeedTray field, or None before ``seed_tray`` ran."""
    return _load(lab, "seed-tray")


def seed_tray(lab: Lab, fresh: bool = False) -> str:
    """Define the SeedTray kind, its fields' units drawn once per lab (again when ``fresh``)."""
    units = None if fresh else tray_units(lab)
    if units is None:
        natural = {field: unit for field, (_, unit) in WANTED.items()}
        while units is None or units == natural:  # at least one field never takes the task's numbers as said
            units = {field: secrets.choice(sorted(UNITS[field])) for field in UNITS}
        _save(lab, "seed-tray", units)
        if lab.get("crd", TRAYS):  # a tray made for the old units would read wrongly under the new ones
            lab.delete(TRAYS, TRAY, NAMESPACE)
    spec = {"type": "object", "required": sorted(UNITS), "description": "What a tray of seedlings needs.",
            "properties": {field: {"type": TYPES[field], "minimum": 0, "description": describe(field, unit)}
                           for field, unit in units.items()}}
    _define(lab, _crd(TRAY_GROUP, "SeedTray", "seedtrays", "v1", spec, "units-from-explain"))
    return f"The SeedTray kind ({TRAYS}) is defined."


def tray_values(units: dict[str, str]) -> dict[str, Any]:
    """The task's values, each in the unit drawn for its field."""
    return {field: UNITS[field][unit][1] for field, unit in units.items()}


def documented_units(lab: Lab) -> dict[str, str | None]:
    """Each field's unit as the SeedTray CRD in the cluster documents it now (None: no drawn one fits)."""
    crd = lab.get("crd", TRAYS) or {}
    versions = (crd.get("spec") or {}).get("versions") or [{}]
    props = ((versions[0].get("schema") or {}).get("openAPIV3Schema") or {}).get("properties", {})
    fields = (props.get("spec") or {}).get("properties") or {}
    found: dict[str, str | None] = {}
    for field in UNITS:
        said = (fields.get(field) or {}).get("description", "")
        found[field] = next((unit for unit in UNITS[field] if said == describe(field, unit)), None)
    return found
