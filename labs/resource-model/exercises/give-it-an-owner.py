"""Exercise: make the ConfigMap ``mint-care`` belong to the Plant ``mint``.

An owner reference names one exact object: apiVersion, kind, name and, above all, uid. The check
compares the reference with the Plant that is in the cluster now, so a reference copied from an
older, deleted ``mint`` (another uid) does not count. Once it is right, deleting the Plant lets the
garbage collector delete the ConfigMap, which the notebook shows next. When the ConfigMap has no
owner, the check also reads the Plant's own ownerReferences, to tell a reference that points the wrong
way (the owner naming its dependent) from none at all.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from krmcourse import CheckFailed, Lab

NAMESPACE = "model"
API_VERSION = "garden.krmcourse.dev/v1"


def check(lab: Lab) -> None:
    plant = lab.get("plants.garden.krmcourse.dev", "mint", namespace=NAMESPACE)
    if plant is None:
        raise CheckFailed(
            "There is no Plant called mint in the model namespace: reset the lab to get it back."
        )
    care = lab.get("configmap", "mint-care", namespace=NAMESPACE)
    if care is None:
        raise CheckFailed(
            "The ConfigMap mint-care is gone from the model namespace: reset the lab to get it back."
        )
    refs = care["metadata"].get("ownerReferences") or []
    if not refs:
        if _reversed(plant, care):
            raise CheckFailed(
                "The reference points the wrong way: the Plant mint names mint-care as its owner. "
                "An owner reference sits on the dependent and names the object it belongs to."
            )
        raise CheckFailed("mint-care has no owner yet: its metadata names no owner at all.")
    plants = [r for r in refs if r.get("kind") == "Plant" and r.get("name") == "mint"]
    if not plants:
        named = ", ".join(f"{r.get('kind')}/{r.get('name')}" for r in refs)
        raise CheckFailed(f"mint-care's owners are {named}, but none of them is the Plant mint.")
    ref = plants[0]
    if ref.get("apiVersion") != API_VERSION:
        raise CheckFailed(
            f"The owner reference says apiVersion {ref.get('apiVersion')!r}; the Plant's group "
            "and version are not that."
        )
    if ref.get("uid") != plant["metadata"]["uid"]:
        raise CheckFailed(
            "The owner reference names a Plant mint, but its uid is not the uid of the mint "
            "that is in the cluster now."
        )


def _reversed(plant: dict[str, Any], care: dict[str, Any]) -> list[dict[str, Any]]:
    """The Plant's owner references that name the ConfigMap: the relationship written backwards."""
    uid = care["metadata"]["uid"]
    return [r for r in plant["metadata"].get("ownerReferences") or [] if r.get("uid") == uid]


def solve(lab: Lab) -> None:
    plant = lab.get("plants.garden.krmcourse.dev", "mint", namespace=NAMESPACE)
    if plant is None:
        raise CheckFailed("There is no Plant called mint to own the ConfigMap; reset the lab first.")
    owner = {"apiVersion": API_VERSION, "kind": "Plant", "name": "mint", "uid": plant["metadata"]["uid"]}
    lab.kubectl(
        "patch",
        "configmap",
        "mint-care",
        "-n",
        NAMESPACE,
        "--type=merge",
        "-p",
        json.dumps({"metadata": {"ownerReferences": [owner]}}),
    )
    care = lab.get("configmap", "mint-care", namespace=NAMESPACE)
    backwards = _reversed(plant, care) if care is not None else []
    if backwards:  # an earlier try wrote the reference on the Plant: take it off again
        kept = [r for r in plant["metadata"]["ownerReferences"] if r not in backwards]
        lab.kubectl("patch", "plants.garden.krmcourse.dev", "mint", "-n", NAMESPACE, "--type=merge",
                    "-p", json.dumps({"metadata": {"ownerReferences": kept or None}}))


def _put_the_reference_on_the_plant(lab: Lab) -> None:
    """Write the reference on the Plant, naming the ConfigMap: ownership the wrong way round."""
    care = lab.get("configmap", "mint-care", namespace=NAMESPACE)
    assert care is not None
    owned_by = {"apiVersion": "v1", "kind": "ConfigMap", "name": "mint-care", "uid": care["metadata"]["uid"]}
    lab.kubectl("patch", "plants.garden.krmcourse.dev", "mint", "-n", NAMESPACE, "--type=merge",
                "-p", json.dumps({"metadata": {"ownerReferences": [owned_by]}}))


def _reference_with_the_configmaps_api_version(lab: Lab) -> None:
    """Name the Plant mint with its real uid, but copy apiVersion v1 from the ConfigMap's own header."""
    plant = lab.get("plants.garden.krmcourse.dev", "mint", namespace=NAMESPACE)
    assert plant is not None
    owner = {"apiVersion": "v1", "kind": "Plant", "name": "mint", "uid": plant["metadata"]["uid"]}
    lab.kubectl("patch", "configmap", "mint-care", "-n", NAMESPACE, "--type=merge",
                "-p", json.dumps({"metadata": {"ownerReferences": [owner]}}))


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "the reference on the Plant, naming the ConfigMap": _put_the_reference_on_the_plant,
    "an owner reference with the ConfigMap's apiVersion": _reference_with_the_configmaps_api_version,
}
