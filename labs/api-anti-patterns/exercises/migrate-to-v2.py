"""Exercise: move every stored FancyDNS to v2 and make storedVersions say so.

The check reads the CRD's status.storedVersions from the real API server, and every FancyDNS as v2.
"""

from __future__ import annotations

from krmcourse import CheckFailed, Lab


def check(lab: Lab) -> None:
    """Fail unless v2 is the storage version and the only version etcd may still hold."""
    conv = lab.support("fancydns_conversion")
    crd = lab.get("customresourcedefinition", conv.CRD_NAME)
    if crd is None:
        raise CheckFailed("The FancyDNS CRD is gone.")
    storage = [v["name"] for v in crd["spec"]["versions"] if v.get("storage")]
    if storage != ["v2"]:
        raise CheckFailed(f"The storage version is {storage[0] if storage else 'unset'}, not v2.")
    stored = crd.get("status", {}).get("storedVersions", [])
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
