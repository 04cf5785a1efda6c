"""Exercise: create the Plant of ``files/fern.yaml`` with an HTTP POST that you send yourself.

The file as shipped is refused by the API server (one field has the wrong type), so the learner
first reads a real ``Status`` error, then fixes a copy and POSTs it. The check looks at the stored
object's ``managedFields``: a write by ``kubectl create`` or ``kubectl apply`` is recorded under
their own manager names, while a raw request is recorded under the client's user agent. The object
must also not have been created by kubectl: a raw write that only touches a fern kubectl made is not
the POST.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import yaml

from krmcourse import CheckFailed, Lab

NAMESPACE = "model"
KUBECTL_MANAGERS = (
    "kubectl-create",
    "kubectl-client-side-apply",
    "kubectl-edit",
    "kubectl-replace",
    "kubectl-patch",
)
# The (manager, operation) pairs of kubectl's ways to create an object from a file.
KUBECTL_CREATORS = {("kubectl-create", "Update"), ("kubectl-client-side-apply", "Update"), ("kubectl", "Apply")}


def check(lab: Lab) -> None:
    wanted = yaml.safe_load((lab.path / "files" / "fern.yaml").read_text())
    if lab.get("plants.garden.krmcourse.dev", "fern", namespace=NAMESPACE) is None:
        raise CheckFailed("There is no Plant called fern in the model namespace yet.")
    # kubectl hides managedFields unless asked, and they are what tells who wrote the object.
    fern = json.loads(
        lab.kubectl(
            "get",
            "plants.garden.krmcourse.dev",
            "fern",
            "-n",
            NAMESPACE,
            "-o",
            "json",
            "--show-managed-fields",
        )
    )
    if fern["spec"].get("species") != wanted["spec"]["species"]:
        raise CheckFailed(
            f"fern's species is {fern['spec'].get('species')!r}; fern.yaml says "
            f"{wanted['spec']['species']!r}."
        )
    if fern["spec"].get("location") != wanted["spec"]["location"]:
        raise CheckFailed(f"fern stands at {fern['spec'].get('location')!r}, not where fern.yaml puts it.")
    writes = fern["metadata"].get("managedFields") or []
    creators = sorted(w["manager"] for w in writes if (w.get("manager"), w.get("operation")) in KUBECTL_CREATORS)
    if creators:
        raise CheckFailed(
            f"fern was created with kubectl (its managedFields name {', '.join(creators)}). This exercise "
            "wants the request that creates it to be your own; a raw write after kubectl's does not count."
        )
    raw = [w for w in writes if w.get("operation") == "Update" and w.get("manager") not in KUBECTL_MANAGERS]
    if not raw:
        managers = ", ".join(f"{w.get('manager')} ({w.get('operation')})" for w in writes)
        raise CheckFailed(
            f"fern was written only by {managers}, according to its managedFields; this "
            "exercise wants the POST to come from a request you send yourself."
        )


def _fixed_fern(lab: Lab) -> dict[str, Any]:
    """fern.yaml with the field the API server refuses corrected."""
    document: dict[str, Any] = yaml.safe_load((lab.path / "files" / "fern.yaml").read_text())
    document["spec"]["wateringIntervalHours"] = 48
    return document


def solve(lab: Lab) -> None:
    wire = lab.support("krm_wire")
    document = _fixed_fern(lab)
    if not lab.solved("post-a-plant"):  # a fern made some other way: only a fresh POST can make it ours
        lab.delete("plants.garden.krmcourse.dev", "fern", namespace=NAMESPACE)
    with wire.RawClient(lab.kubeconfig, user_agent="fern-solver/1.0") as raw:
        reply = raw.post_yaml(yaml.safe_dump(document))
    if reply.status not in (201, 409):
        raise RuntimeError(f"The POST of fern failed: {reply.status} {reply.message}")


def _create_it_with_kubectl(lab: Lab) -> None:
    """Fix a copy of the file and hand it to kubectl create, as one would outside this exercise."""
    lab.kubectl("create", "-f", "-", input=json.dumps(_fixed_fern(lab)))


def _touch_it_with_a_raw_request(lab: Lab) -> None:
    """Then send a raw request of one's own after all: read the kubectl-made fern and PUT it back labelled."""
    wire = lab.support("krm_wire")
    with wire.RawClient(lab.kubeconfig) as raw:
        path = raw.collection_path("garden.krmcourse.dev/v1", "Plant", NAMESPACE) + "/fern"
        fern = raw.get(path).body
        fern["metadata"].setdefault("labels", {})["sent-by"] = "me"
        reply = raw.put(path, fern)
    assert reply.status == 200, reply.message


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "create the fixed copy with kubectl": _create_it_with_kubectl,
    "a raw PUT on the fern that kubectl created": _touch_it_with_a_raw_request,
}
