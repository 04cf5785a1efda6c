"""Exercise: make the ConfigMap ``mint-care`` belong to the Plant ``mint``.

An owner reference names one exact object: apiVersion, kind, name and, above all, uid. The check
compares the reference with the Plant that is in the cluster now, so a reference copied from an
older, deleted ``mint`` (another uid) does not count. Once it is right, deleting the Plant lets the
garbage collector delete the ConfigMap, which the notebook shows next.
"""

from __future__ import annotations

import json

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
