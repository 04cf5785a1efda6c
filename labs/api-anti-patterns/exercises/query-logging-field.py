"""Exercise: replace the query-logging annotation with a validated spec field.

The check asks the real API server: a FancyDNS with `spec.queryLogging: Enabled` must be accepted and
kept (not pruned), and a misspelt value must be rejected.
"""

from __future__ import annotations

import json

from krmcourse import CheckFailed, Lab

FIELD_SCHEMA = {
    "type": "string",
    "enum": ["Enabled", "Disabled"],
    "default": "Disabled",
    "description": (
        "Log every query. Alpha: the operator honours it only when it runs with the QueryLogging "
        "feature gate on, and reports that in the QueryLogging condition."
    ),
}


def check(lab: Lab) -> None:
    """Fail unless the schema accepts queryLogging: Enabled and rejects any other value."""
    fd = lab.support("fancydns")
    good = fd.dry_run(lab, fd.fancydns("check-ql", "ql.example", queryLogging="Enabled"))
    if not good.accepted:
        raise CheckFailed(
            "The API server does not accept spec.queryLogging on a v1 FancyDNS yet. It said: " + good.message
        )
    if (good.object or {}).get("spec", {}).get("queryLogging") != "Enabled":
        raise CheckFailed("The server accepted spec.queryLogging but did not keep it: is it in the schema?")
    bad = fd.dry_run(lab, fd.fancydns("check-ql", "ql.example", queryLogging="enabeld"))
    if bad.accepted:
        raise CheckFailed(
            "spec.queryLogging accepts any string, so a typo is still silently stored. "
            "Restrict it to the values the operator understands."
        )


def solve(lab: Lab) -> None:
    """Add the field, with an enum, a default and a description, to the v1 schema of the live CRD."""
    fd = lab.support("fancydns")
    crd = lab.get("customresourcedefinition", fd.CRD_NAME)
    assert crd is not None, "the FancyDNS CRD is missing; bring the lab up first"
    patch = []
    for index, version in enumerate(crd["spec"]["versions"]):
        if version["name"] in ("v1", "v2"):
            path = f"/spec/versions/{index}/schema/openAPIV3Schema/properties/spec/properties/queryLogging"
            patch.append({"op": "add", "path": path, "value": FIELD_SCHEMA})
    lab.kubectl("patch", "customresourcedefinition", fd.CRD_NAME, "--type=json", "-p", json.dumps(patch))
    lab.wait_until(lambda: check_quietly(lab), timeout=30, message="the new schema is not served yet")


def check_quietly(lab: Lab) -> bool:
    """True once check() passes; the server takes a moment to publish a changed schema."""
    try:
        check(lab)
    except CheckFailed:
        return False
    return True
