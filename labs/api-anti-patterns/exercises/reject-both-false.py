"""Exercise: reject a FancyDNS with enableTCP and enableUDP both false, with a CEL rule.

The check sends the four combinations to the real API server (dry-run): only both-false may fail, and
it must fail because of a validation rule.
"""

from __future__ import annotations

import json

from krmcourse import CheckFailed, Lab

RULE = {
    "rule": "self.enableTCP || self.enableUDP",
    "message": "a FancyDNS must serve at least one protocol: set enableTCP or enableUDP to true",
    "reason": "FieldValueInvalid",
}


def check(lab: Lab) -> None:
    """Fail unless exactly the both-false combination is rejected."""
    fd = lab.support("fancydns")
    rows = {(r["enableTCP"], r["enableUDP"]): r for r in fd.protocol_matrix(lab)}
    if rows[(False, False)]["accepted"]:
        raise CheckFailed("The server still accepts a FancyDNS that serves neither TCP nor UDP.")
    for combo, row in rows.items():
        if combo != (False, False) and not row["accepted"]:
            raise CheckFailed(
                f"The server now rejects enableTCP={combo[0]}, enableUDP={combo[1]}, a valid combination: "
                + row["server says"]
            )


def solve(lab: Lab) -> None:
    """Add the CEL rule to the v1 spec schema of the live CRD."""
    fd = lab.support("fancydns")
    crd = lab.get("customresourcedefinition", fd.CRD_NAME)
    assert crd is not None, "the FancyDNS CRD is missing; bring the lab up first"
    index = next(i for i, v in enumerate(crd["spec"]["versions"]) if v["name"] == "v1")
    spec_schema = crd["spec"]["versions"][index]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    path = f"/spec/versions/{index}/schema/openAPIV3Schema/properties/spec/x-kubernetes-validations"
    if "x-kubernetes-validations" in spec_schema:
        patch = [{"op": "add", "path": path + "/-", "value": RULE}]
    else:
        patch = [{"op": "add", "path": path, "value": [RULE]}]
    lab.kubectl("patch", "customresourcedefinition", fd.CRD_NAME, "--type=json", "-p", json.dumps(patch))

    lab.wait_until(lambda: lab.solved("reject-both-false"), timeout=30, message="the CEL rule is not enforced yet")
