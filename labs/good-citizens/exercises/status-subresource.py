"""Exercise status-subresource: give Gadget a status subresource (G4).

Without it, status is just another part of the object: writing status.lastProbe bumps
metadata.generation, so a "generation changed" predicate lets every status write through, including
the controller's own (a hot loop). With it, status is written through /status and the generation
only moves when the spec does.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from krmcourse import CheckFailed, Lab
from krmcourse.apiload import MERGE, RestClient, message

CRD = "gadgets.citizens.krmcourse.dev"
DEMO = "/apis/citizens.krmcourse.dev/v1/namespaces/citizens/gadgets/demo"


def check(lab: Lab) -> None:
    crd = lab.get("crd", CRD)
    if crd is None:
        raise CheckFailed(f"The CRD {CRD} is missing; bring the lab up again with lab.reset().")
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")
    if "status" not in (version.get("subresources") or {}):
        raise CheckFailed(
            "Version v1 of the Gadget CRD, as the API server stored it, declares no status subresource, so "
            "a status write is a write to the whole object and moves metadata.generation. (A CRD field written "
            "in the wrong place is dropped by the API server; kubectl patch only warns.)"
        )
    rest = RestClient(lab.kubeconfig)
    try:
        before = rest.ok("GET", DEMO)["metadata"]["generation"]
        answer = rest.call(
            "PATCH",
            f"{DEMO}/status",
            {"status": {"lastProbe": f"check-{time.time():.0f}"}},
            content_type=MERGE,
        )
        if answer.status_code != 200:
            raise CheckFailed(f"Writing the status of gadget demo through /status failed: {message(answer)}")
        after = rest.ok("GET", DEMO)["metadata"]["generation"]
    finally:
        rest.close()
    if after != before:
        raise CheckFailed(f"A status write moved gadget demo's generation from {before} to {after}.")


def solve(lab: Lab) -> None:
    ops = [{"op": "add", "path": "/spec/versions/0/subresources", "value": {"status": {}}}]
    lab.kubectl("patch", "crd", CRD, "--type=json", "-p", json.dumps(ops))
    lab.wait_until(lambda: lab.solved("status-subresource"), timeout=30,
                   message="the status subresource was not served in time")


def _subresources_beside_the_versions(lab: Lab) -> None:
    """Patch subresources in under spec, where v1beta1 CRDs had them: the API server drops the unknown field."""
    lab.kubectl("patch", "crd", CRD, "--type=merge", "-p", '{"spec": {"subresources": {"status": {}}}}')


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "subresources beside the versions, as in v1beta1": _subresources_beside_the_versions,
}
