"""Exercise: bring a deleted Plant back as the same object, from a backup of its etcd entry.

``krm_store.lose_a_plant`` makes a Plant with a name drawn for this lab, saves the bytes etcd holds for
it, and deletes it through the API server. Any create through the API server makes a new object, with a
new uid (the server sets uid and creationTimestamp itself, whatever the body says). Only writing the
saved bytes back under the key the API server reads brings back the object it was, uid and all, and the
API server serves it at once, without a restart: it keeps no state of its own. The check compares the
Plant in the cluster with the backup, uid first.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from krmcourse import CheckFailed, Lab


def check(lab: Lab) -> None:
    store = lab.support("krm_store")
    if not lab.can("etcd"):
        raise CheckFailed(f"The {lab.provider.name} provider keeps etcd out of reach, so this exercise cannot "
                          "be done on it; use a lab that krmcourse runs itself.")
    kept = store.lost(lab)
    if kept is None:
        raise CheckFailed("Nothing has been lost yet: run the notebook's cell that calls krm_store.lose_a_plant(lab).")
    name, uid = kept["metadata"]["name"], kept["metadata"]["uid"]
    plant = lab.get(store.PLANTS, name, store.NAMESPACE)
    if plant is None:
        raise CheckFailed(
            f"There is no Plant {name} in {store.NAMESPACE}. The API server serves a Plant from one etcd key, "
            "and nothing is stored under that key now: krm_inspect.storage_key and the API server's "
            "--etcd-prefix say which key it reads.")
    if plant["metadata"]["uid"] != uid:
        raise CheckFailed(
            f"There is a Plant {name} again, but its uid is {plant['metadata']['uid']}, and the one in the backup "
            f"is {uid}. It came in through the API server as a new object, so the server gave it a new identity. "
            "The backup holds what the server itself once read for the old one.")
    if plant.get("spec") != kept.get("spec"):
        raise CheckFailed(f"Plant {name} has its old uid, but not the spec the backup holds.")


def solve(lab: Lab) -> None:
    store = lab.support("krm_store")
    if store.lost(lab) is None:
        store.lose_a_plant(lab)
    value = store.backup_path(lab).read_bytes()
    kept = json.loads(value)
    name = kept["metadata"]["name"]
    store.etcd_put(lab, store.storage_key(lab, name), value)
    lab.wait_until(lambda: (lab.get(store.PLANTS, name, store.NAMESPACE) or {}).get("metadata", {}).get("uid")
                   == kept["metadata"]["uid"], timeout=30, message=f"the API server does not serve {name} again")


def _create_from_the_backup(lab: Lab) -> None:
    """Hand the backup to kubectl create, uid and all, as if it were any other manifest."""
    store = lab.support("krm_store")
    store.lose_a_plant(lab)
    lab.kubectl("create", "-f", "-", input=store.backup_path(lab).read_text())


def _put_under_the_kinds_name(lab: Lab) -> None:
    """Delete that new Plant, then write the backup into etcd under .../plant/... (the kind's name, not the
    resource's plural)."""
    store = lab.support("krm_store")
    kept = store.lost(lab) or {}
    name = kept["metadata"]["name"]
    lab.delete(store.PLANTS, name, store.NAMESPACE)
    wrong_key = store.storage_key(lab, name).replace("/plants/", "/plant/")
    store.etcd_put(lab, wrong_key, store.backup_path(lab).read_bytes())


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "kubectl create from the backup": _create_from_the_backup,
    "the backup written under the kind's name instead of the plural": _put_under_the_kinds_name,
}
