"""Exercise: reject a FancyDNS with enableTCP and enableUDP both false, with a CEL rule.

The check sends the four combinations to the real API server (dry-run): only both-false may fail. When
both-false still gets through, it reads the CRD's spec schema to tell a missing rule from one that
never fires.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from krmcourse import CheckFailed, Lab

RULE = {
    "rule": "self.enableTCP || self.enableUDP",
    "message": "a FancyDNS must serve at least one protocol: set enableTCP or enableUDP to true",
    "reason": "FieldValueInvalid",
}
BOTH_FALSE = (False, False)


def check(lab: Lab) -> None:
    """Fail unless exactly the both-false combination is rejected."""
    fd = lab.support("fancydns")
    rows = {(r["enableTCP"], r["enableUDP"]): r for r in fd.protocol_matrix(lab)}
    if rows[BOTH_FALSE]["accepted"]:
        crd = lab.get("customresourcedefinition", fd.CRD_NAME)
        rules = [r.get("rule") for r in _spec_schema(crd)[1].get("x-kubernetes-validations", [])] if crd else []
        raise CheckFailed(
            "The server still accepts a FancyDNS that serves neither TCP nor UDP."
            + (f" The spec has the rule(s) {rules}, but none fires for both false: both fields have defaults, "
               "so a rule always sees them present, with their values." if rules else "")
        )
    for combo, row in rows.items():
        if combo != BOTH_FALSE and not row["accepted"]:
            raise CheckFailed(
                f"The server now rejects enableTCP={combo[0]}, enableUDP={combo[1]}, a valid combination: "
                + row["server says"]
            )


def _spec_schema(crd: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """The index of v1 in the CRD's versions, and its spec schema."""
    index = next(i for i, v in enumerate(crd["spec"]["versions"]) if v["name"] == "v1")
    return index, crd["spec"]["versions"][index]["schema"]["openAPIV3Schema"]["properties"]["spec"]


def solve(lab: Lab) -> None:
    """Add the CEL rule to the v1 spec schema of the live CRD."""
    _set_rule(lab, RULE, rejects={BOTH_FALSE})


def _set_rule(lab: Lab, rule: dict[str, str], rejects: set[tuple[bool, bool]]) -> None:
    """Make ``rule`` the spec's only rule about the two booleans, and wait until the server rejects ``rejects``."""
    fd = lab.support("fancydns")
    crd = lab.get("customresourcedefinition", fd.CRD_NAME)
    assert crd is not None, "the FancyDNS CRD is missing; bring the lab up first"
    index, spec_schema = _spec_schema(crd)
    others = [r for r in spec_schema.get("x-kubernetes-validations", [])
              if "enableTCP" not in r.get("rule", "") and "enableUDP" not in r.get("rule", "")]
    path = f"/spec/versions/{index}/schema/openAPIV3Schema/properties/spec/x-kubernetes-validations"
    patch = [{"op": "add", "path": path, "value": [*others, rule]}]  # "add" replaces the list if there is one
    lab.kubectl("patch", "customresourcedefinition", fd.CRD_NAME, "--type=json", "-p", json.dumps(patch))

    def served() -> bool:
        return {(r["enableTCP"], r["enableUDP"]) for r in fd.protocol_matrix(lab) if not r["accepted"]} == rejects

    lab.wait_until(served, timeout=30, message="the CEL rule is not enforced yet")


def _require_both(lab: Lab) -> None:
    """Write the rule with && instead of ||: now every FancyDNS must serve both protocols."""
    _set_rule(lab, {**RULE, "rule": "self.enableTCP && self.enableUDP"},
              rejects={(True, False), (False, True), BOTH_FALSE})


def _test_presence(lab: Lab) -> None:
    """Ask whether the fields are set, with has(), instead of what they are set to."""
    _set_rule(lab, {**RULE, "rule": "has(self.enableTCP) || has(self.enableUDP)"}, rejects=set())


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "&& instead of || in the rule": _require_both,
    "has() instead of the values in the rule": _test_presence,
}
