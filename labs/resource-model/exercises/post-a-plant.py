"""Exercise: create the Plant of ``files/fern.yaml`` with an HTTP POST that you send yourself.

The file as shipped is refused by the API server (one field has the wrong type), so the learner
first reads a real ``Status`` error, then fixes a copy and POSTs it. The check looks at the stored
object's ``managedFields``: a write by ``kubectl create`` or ``kubectl apply`` is recorded under
their own manager names, while a raw request is recorded under the client's user agent.
"""

from __future__ import annotations

import json

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
    raw = [w for w in writes if w.get("operation") == "Update" and w.get("manager") not in KUBECTL_MANAGERS]
    if not raw:
        managers = ", ".join(f"{w.get('manager')} ({w.get('operation')})" for w in writes)
        raise CheckFailed(
            f"fern was written only by {managers}, according to its managedFields; this "
            "exercise wants the POST to come from a request you send yourself."
        )


def solve(lab: Lab) -> None:
    wire = lab.support("krm_wire")
    document = yaml.safe_load((lab.path / "files" / "fern.yaml").read_text())
    document["spec"]["wateringIntervalHours"] = 48
    with wire.RawClient(lab.kubeconfig, user_agent="fern-solver/1.0") as raw:
        reply = raw.post_yaml(yaml.safe_dump(document))
    if reply.status not in (201, 409):
        raise RuntimeError(f"The POST of fern failed: {reply.status} {reply.message}")
