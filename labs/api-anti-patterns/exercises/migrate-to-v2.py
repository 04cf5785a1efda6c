"""Exercise: move every stored FancyDNS to v2 and make storedVersions say so.

The check reads the CRD's status.storedVersions from the real API server, every FancyDNS as v2, and,
where the lab's provider reaches etcd (kwok, kind), the version each object is really encoded in there:
storedVersions is only a record that someone edits, so trimming it proves nothing by itself.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from krmcourse import CheckFailed, Lab


def check(lab: Lab) -> None:
    """Fail unless v2 is the storage version, the only version etcd holds, and storedVersions says so."""
    conv = lab.support("fancydns_conversion")
    crd = lab.get("customresourcedefinition", conv.CRD_NAME)
    if crd is None:
        raise CheckFailed("The FancyDNS CRD is gone.")
    storage = [v["name"] for v in crd["spec"]["versions"] if v.get("storage")]
    if storage != ["v2"]:
        raise CheckFailed(f"The storage version is {storage[0] if storage else 'unset'}, not v2.")
    stored = crd.get("status", {}).get("storedVersions", [])
    stale = {name: version for name, version in (conv.stored_as(lab) or {}).items() if version != "v2"}
    if stale:
        raise CheckFailed(
            "etcd itself still holds " + ", ".join(f"{n} as {v}" for n, v in sorted(stale.items()))
            + ". An object is re-encoded in the storage version only when the API server writes it, and an "
            "apply that finds nothing to change writes nothing."
            + (" status.storedVersions already says v2 only, which is not true: removing v1 from the CRD "
               "now would leave those objects unreadable." if stored == ["v2"] else "")
        )
    if stored != ["v2"]:
        raise CheckFailed(
            f"status.storedVersions is {stored}: the CRD still records that etcd may hold objects "
            "in other versions."
        )
    missing = [o["metadata"]["name"] for o in conv.read_as(lab, "v2") if not o["spec"].get("protocol")]
    if missing:
        raise CheckFailed(f"These FancyDNS objects have no spec.protocol when read as v2: {missing}")


def solve(lab: Lab) -> None:
    """Serve v2 with the conversion webhook, rewrite every object, then trim storedVersions."""
    conv = lab.support("fancydns_conversion")
    conv.ensure_v2(lab)
    conv.migrate(lab)


def _trim_stored_versions(lab: Lab) -> None:
    """Take v1 out of storedVersions through the status subresource, rewriting no object."""
    conv = lab.support("fancydns_conversion")
    conv.ensure_v2(lab)  # as the notebook leaves it: v2 served and stored, through the webhook
    lab.kubectl("patch", "customresourcedefinition", conv.CRD_NAME, "--subresource=status", "--type=merge",
                "-p", json.dumps({"status": {"storedVersions": ["v2"]}}))


def _reapply_the_manifests(lab: Lab) -> None:
    """Apply the lab's manifests again to "rewrite" the objects (nothing changed, so nothing is sent), then trim."""
    lab.apply(lab.path / "manifests" / "30-fancydns.yaml")
    _trim_stored_versions(lab)


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "trim storedVersions without rewriting the objects": _trim_stored_versions,
    "apply the unchanged manifests again, then trim storedVersions": _reapply_the_manifests,
}
