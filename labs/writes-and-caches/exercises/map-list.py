"""Exercise map-list: let two field managers own different entries of spec.ports (G5).

A list in a CRD schema without ``x-kubernetes-list-type`` is atomic: server-side apply treats the
whole list as one field with one owner, so a second manager who adds a port conflicts with the
first. Declared as a map list keyed by ``name``, each entry has its own owner.

The check reads the CRD's schema for spec.ports, then proves it on widget shared with a dry-run
apply by a second manager, whose port must join the ones already there.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from krmcourse import CheckFailed, Lab
from krmcourse.apiload import MERGE, SSA, RestClient, message

CRD = "widgets.citizens.krmcourse.dev"
SHARED = "/apis/citizens.krmcourse.dev/v1/namespaces/citizens/widgets/shared"
PORTS = "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/ports"
HTTP = {"name": "http", "port": 8080}  # the port widget shared starts with, owned by kubectl
# What a second manager, team-metrics, applies to widget shared: a port of its own.
SECOND = {
    "apiVersion": "citizens.krmcourse.dev/v1",
    "kind": "Widget",
    "metadata": {"name": "shared", "namespace": "citizens"},
    "spec": {"ports": [{"name": "metrics", "port": 9090}]},
}


def ports_schema(lab: Lab) -> dict[str, Any]:
    crd = lab.get("crd", CRD)
    if crd is None:
        raise CheckFailed(f"The CRD {CRD} is missing; bring the lab up again with lab.reset().")
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")
    return dict(version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["ports"])


def check(lab: Lab) -> None:
    ports = ports_schema(lab)
    if ports.get("x-kubernetes-list-type") != "map":
        shared = lab.get("widgets.citizens.krmcourse.dev", "shared", namespace="citizens") or {}
        names = [p.get("name") for p in (shared.get("spec") or {}).get("ports") or []]
        lost = "" if HTTP["name"] in names else (
            f" Widget shared has lost its {HTTP['name']} port too ({names} now): an apply with force takes "
            "an atomic list whole, and drops the entries its manager did not send.")
        raise CheckFailed(
            "spec.ports in the Widget CRD is still an atomic list: server-side apply gives the "
            f"whole list a single owner.{lost}"
        )
    if ports.get("x-kubernetes-list-map-keys") != ["name"]:
        raise CheckFailed("spec.ports is a map list, but its entries are not told apart by their name.")
    # The proof: a second manager adds its own port to widget shared (dry run: nothing is stored).
    rest = RestClient(lab.kubeconfig)
    try:
        answer = rest.call(
            "PATCH", SHARED, SECOND, content_type=SSA, params={"fieldManager": "team-metrics", "dryRun": "All"}
        )
    finally:
        rest.close()
    if answer.status_code != 200:
        raise CheckFailed(f"A second manager still cannot add a port to widget shared: {message(answer)}")
    names = [p.get("name") for p in answer.json()["spec"].get("ports", [])]
    if "metrics" not in names or len(names) < 2:
        raise CheckFailed(f"The second manager's port replaced the others instead of joining them: {names}")


def solve(lab: Lab) -> None:
    ops = [{"op": "add", "path": f"{PORTS}/x-kubernetes-list-type", "value": "map"},
           {"op": "add", "path": f"{PORTS}/x-kubernetes-list-map-keys", "value": ["name"]}]
    lab.kubectl("patch", "crd", CRD, "--type=json", "-p", json.dumps(ops))
    _bring_back_the_http_port(lab)  # only ever missing after a forced apply of the atomic list
    # The API server swaps in the new schema a moment after the CRD changes.
    lab.wait_until(lambda: lab.solved("map-list"), timeout=30, message="the new list type was not served in time")


def _bring_back_the_http_port(lab: Lab) -> None:
    """A forced apply of the whole list (an earlier try) dropped the http port: put it back beside the others."""
    rest = RestClient(lab.kubeconfig)
    try:
        ports = rest.ok("GET", SHARED)["spec"].get("ports") or []
        if HTTP["name"] not in [p.get("name") for p in ports]:
            rest.ok("PATCH", SHARED, {"spec": {"ports": [*ports, HTTP]}}, content_type=MERGE)
    finally:
        rest.close()


def _force_the_second_managers_apply(lab: Lab) -> None:
    """Answer the 409 as in take-ownership: apply team-metrics' port with force, leaving the list atomic."""
    rest = RestClient(lab.kubeconfig)
    try:
        rest.ok("PATCH", SHARED, SECOND, content_type=SSA, params={"fieldManager": "team-metrics", "force": "true"})
    finally:
        rest.close()


def _key_the_entries_by_port(lab: Lab) -> None:
    """A map list, but keyed by the port number, which changes, instead of the name, which does not."""
    markers = {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["port"]}
    operations = [{"op": "add", "path": f"{PORTS}/{marker}", "value": value} for marker, value in markers.items()]
    lab.kubectl("patch", "crd", CRD, "--type=json", "-p", json.dumps(operations))


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "force the second manager's apply": _force_the_second_managers_apply,
    "a map list keyed by port": _key_the_entries_by_port,
}
