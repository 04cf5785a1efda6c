"""Exercise: replace the query-logging annotation with a validated spec field.

The check asks the real API server: a FancyDNS with `spec.queryLogging: Enabled` must be accepted and
kept (not pruned), a misspelt value must be rejected, and one that leaves the field out must come back
with `Disabled` (all server-side dry runs). It also reads the field's description in the CRD, which is
what `kubectl explain` shows: a user must be able to find out that the field depends on the operator's
feature gate.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

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
    """Fail unless the schema accepts queryLogging: Enabled, rejects any other value, defaults and documents it."""
    fd = lab.support("fancydns")
    good = fd.dry_run(lab, fd.fancydns("check-ql", "ql.example", queryLogging="Enabled"))
    if not good.accepted:
        raise CheckFailed(
            "The API server does not accept a v1 FancyDNS with spec.queryLogging: Enabled. It said: " + good.message
        )
    if (good.object or {}).get("spec", {}).get("queryLogging") != "Enabled":
        raise CheckFailed("The server accepted spec.queryLogging but did not keep it: is it in the schema?")
    bad = fd.dry_run(lab, fd.fancydns("check-ql", "ql.example", queryLogging="enabeld"))
    if bad.accepted:
        raise CheckFailed(
            "spec.queryLogging accepts any string, so a typo is still silently stored. "
            "Restrict it to the values the operator understands."
        )
    unset = (fd.dry_run(lab, fd.fancydns("check-ql", "ql.example")).object or {}).get("spec", {}).get("queryLogging")
    if unset != "Disabled":
        raise CheckFailed(
            "A FancyDNS that leaves queryLogging out is stored " + (f"with {unset!r}" if unset else "without it")
            + ", not with Disabled: without a default, the stored object does not say what its owner gets."
        )
    description = _field(lab).get("description", "")
    if not any(word in description.lower() for word in ("feature gate", "feature-gate", "featuregate")):
        raise CheckFailed(
            "kubectl explain shows spec.queryLogging without a word about the operator's QueryLogging feature "
            f"gate (its description is {description!r}): a user who sets Enabled cannot learn why nothing "
            "happens when the gate is off."
        )


def _field(lab: Lab) -> dict[str, Any]:
    """The queryLogging schema of the v1 spec, as the CRD holds it ({} when there is none)."""
    fd = lab.support("fancydns")
    crd = lab.get("customresourcedefinition", fd.CRD_NAME) or {"spec": {"versions": []}}
    for version in crd["spec"]["versions"]:
        if version["name"] == "v1":
            spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
            return dict(spec.get("properties", {}).get("queryLogging", {}))
    return {}


def solve(lab: Lab) -> None:
    """Add the field, with an enum, a default and a description, to the v1 schema of the live CRD."""
    _set_field(lab, FIELD_SCHEMA)
    lab.wait_until(lambda: check_quietly(lab), timeout=30, message="the new schema is not served yet")


def _set_field(lab: Lab, schema: dict[str, Any]) -> None:
    """Put spec.queryLogging in the live CRD's schema (over any earlier try) and wait until it is served."""
    fd = lab.support("fancydns")
    crd = lab.get("customresourcedefinition", fd.CRD_NAME)
    assert crd is not None, "the FancyDNS CRD is missing; bring the lab up first"
    patch = []
    for index, version in enumerate(crd["spec"]["versions"]):
        if version["name"] in ("v1", "v2"):
            path = f"/spec/versions/{index}/schema/openAPIV3Schema/properties/spec/properties/queryLogging"
            patch.append({"op": "add", "path": path, "value": schema})  # "add" replaces a member that exists
    lab.kubectl("patch", "customresourcedefinition", fd.CRD_NAME, "--type=json", "-p", json.dumps(patch))
    takes_enabled = "Enabled" in schema.get("enum", ["Enabled"])
    probe = fd.fancydns("probe-ql", "ql.example", queryLogging="Enabled")
    lab.wait_until(lambda: fd.dry_run(lab, probe).accepted == takes_enabled, timeout=30,
                   message="the changed schema is not served yet")


def check_quietly(lab: Lab) -> bool:
    """True once check() passes; the server takes a moment to publish a changed schema."""
    try:
        check(lab)
    except CheckFailed:
        return False
    return True


def _add_a_plain_string(lab: Lab) -> None:
    """Add queryLogging as a documented string with a default, but no list of allowed values."""
    _set_field(lab, {key: value for key, value in FIELD_SCHEMA.items() if key != "enum"})


def _reuse_the_annotation_values(lab: Lab) -> None:
    """Allow the values the annotation used, "enabled" and "disabled": off by a capital letter."""
    _set_field(lab, {**FIELD_SCHEMA, "enum": ["enabled", "disabled"], "default": "disabled"})


def _leave_it_undocumented(lab: Lab) -> None:
    """Add the enum and the default, but no description: nothing says the field waits for a feature gate."""
    _set_field(lab, {key: value for key, value in FIELD_SCHEMA.items() if key != "description"})


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "a string field with no enum": _add_a_plain_string,
    "the annotation's lower-case values in the enum": _reuse_the_annotation_values,
    "an enum with no description of the feature gate": _leave_it_undocumented,
}
