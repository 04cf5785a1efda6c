"""Exercise map-list: let two field managers own different entries of spec.ports (G5).

A list in a CRD schema without ``x-kubernetes-list-type`` is atomic: server-side apply treats the
whole list as one field with one owner, so a second manager who adds a port conflicts with the
first. Declared as a map list keyed by ``name``, each entry has its own owner.
"""

from __future__ import annotations

from krmcourse import CheckFailed, Lab
from krmcourse.apiload import SSA, RestClient, message

CRD = "widgets.citizens.krmcourse.dev"
SHARED = "/apis/citizens.krmcourse.dev/v1/namespaces/citizens/widgets/shared"


def ports_schema(lab: Lab) -> dict:
    crd = lab.get("crd", CRD)
    if crd is None:
        raise CheckFailed(f"The CRD {CRD} is missing; bring the lab up again with lab.reset().")
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")
    return dict(version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["ports"])


def check(lab: Lab) -> None:
    ports = ports_schema(lab)
    if ports.get("x-kubernetes-list-type") != "map":
        raise CheckFailed(
            "spec.ports in the Widget CRD is still an atomic list: server-side apply gives the "
            "whole list a single owner."
        )
    if ports.get("x-kubernetes-list-map-keys") != ["name"]:
        raise CheckFailed("spec.ports is a map list, but its entries are not told apart by their name.")
    # The proof: a second manager adds its own port to widget shared (dry run: nothing is stored).
    rest = RestClient(lab.kubeconfig)
    try:
        body = {
            "apiVersion": "citizens.krmcourse.dev/v1",
            "kind": "Widget",
            "metadata": {"name": "shared", "namespace": "citizens"},
            "spec": {"ports": [{"name": "metrics", "port": 9090}]},
        }
        answer = rest.call(
            "PATCH", SHARED, body, content_type=SSA, params={"fieldManager": "team-metrics", "dryRun": "All"}
        )
    finally:
        rest.close()
    if answer.status_code != 200:
        raise CheckFailed(f"A second manager still cannot add a port to widget shared: {message(answer)}")
    names = [p.get("name") for p in answer.json()["spec"].get("ports", [])]
    if "metrics" not in names or len(names) < 2:
        raise CheckFailed(f"The second manager's port replaced the others instead of joining them: {names}")


def solve(lab: Lab) -> None:
    lab.kubectl(
        "patch",
        "crd",
        CRD,
        "--type=json",
        "-p",
        '[{"op": "add", "path": "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/'
        'ports/x-kubernetes-list-type", "value": "map"},'
        ' {"op": "add", "path": "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/'
        'ports/x-kubernetes-list-map-keys", "value": ["name"]}]',
    )
    # The API server swaps in the new schema a moment after the CRD changes.
    lab.wait_until(lambda: lab.solved("map-list"), timeout=30, message="the new list type was not served in time")
