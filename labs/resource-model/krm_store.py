"""A Plant lost through the API and kept in a backup of etcd's entry (K6).

``lose_a_plant`` makes a Plant with a name and species drawn for this lab, saves the bytes etcd holds
for it (the backup a cluster operator takes of etcd, cut down to one key's value) in the lab's state
folder, and deletes the Plant through the API server. ``etcd_put`` writes one key straight into the
lab's etcd, past the API server, as ``krm_inspect.etcd_get`` reads one.
"""

from __future__ import annotations

import base64
import json
import secrets
from pathlib import Path
from typing import Any

from krmcourse import Lab

NAMESPACE = "model"
PLANTS = "plants.garden.krmcourse.dev"
HERBS = [("sage", "Salvia officinalis"), ("oregano", "Origanum vulgare"), ("chives", "Allium schoenoprasum"),
         ("dill", "Anethum graveolens"), ("tarragon", "Artemisia dracunculus"), ("sorrel", "Rumex acetosa")]


def backup_path(lab: Lab) -> Path:
    """The backup: exactly the bytes etcd held for the lost Plant."""
    return lab.home / "plant-backup.json"


def lost(lab: Lab) -> dict[str, Any] | None:
    """What the backup holds (the stored object), or None before ``lose_a_plant`` ran."""
    path = backup_path(lab)
    return json.loads(path.read_bytes()) if path.is_file() else None


def storage_key(lab: Lab, name: str) -> str:
    inspect = lab.support("krm_inspect")
    prefix = inspect.apiserver_flags(lab).get("etcd-prefix", "/registry")
    return str(inspect.storage_key(prefix, "garden.krmcourse.dev", "plants", NAMESPACE, name))


def etcd_put(lab: Lab, key: str, value: bytes) -> None:
    """Write ``value`` under ``key`` in the lab's etcd, past the API server (etcd's HTTP gateway, kv/put)."""
    lab.provider.etcd_call(lab.cluster, "kv/put", {"key": base64.b64encode(key.encode()).decode(),
                                                    "value": base64.b64encode(value).decode()})


def lose_a_plant(lab: Lab) -> str:
    """Make a Plant, back up etcd's entry for it, and delete it through the API (once per lab)."""
    if not lab.can("etcd"):
        return f"The {lab.provider.name} provider keeps etcd out of reach, so this exercise cannot run here."
    if (kept := lost(lab)) is None:
        herb, species = secrets.choice(HERBS)
        name = f"{herb}-{secrets.token_hex(2)}"
        lab.apply({"apiVersion": "garden.krmcourse.dev/v1", "kind": "Plant",
                   "metadata": {"name": name, "namespace": NAMESPACE},
                   "spec": {"species": species, "location": "windowsill"}})
        entry = lab.support("krm_inspect").etcd_get(lab, storage_key(lab, name))
        backup_path(lab).write_bytes(entry.value)
        kept = json.loads(entry.value)
        lab.delete(PLANTS, name, NAMESPACE)
    name = kept["metadata"]["name"]
    return (f"The Plant {name} was deleted through the API server. Before that, its entry in etcd was "
            f"saved to {backup_path(lab)}.")
