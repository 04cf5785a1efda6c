"""The reference rules of the references lab, shared by the controller and the exercise checks.

A Website refers to an AssetStore by name, in its own namespace. An AssetStore is in use while any Website
that is not itself being deleted refers to it. A Website's reference resolves when the AssetStore
exists and is not being deleted.
"""

from __future__ import annotations

from typing import Any

FINALIZER = "refs.krmcourse.dev/assetstore-protection"


def users(store: dict[str, Any], websites: list[dict[str, Any]]) -> list[str]:
    """Names of the live Websites that refer to this AssetStore (sorted, for a stable status)."""
    ns, name = store["metadata"]["namespace"], store["metadata"]["name"]
    return sorted(
        w["metadata"]["name"]
        for w in websites
        if w["metadata"]["namespace"] == ns
        and not w["metadata"].get("deletionTimestamp")
        and w.get("spec", {}).get("assetStoreRef", {}).get("name") == name
    )


def resolution(website: dict[str, Any], stores: list[dict[str, Any]]) -> tuple[bool, str, str]:
    """(resolved, reason, message) for a Website's assetStoreRef."""
    ns = website["metadata"]["namespace"]
    name = website.get("spec", {}).get("assetStoreRef", {}).get("name", "")
    store = next(
        (s for s in stores if s["metadata"]["namespace"] == ns and s["metadata"]["name"] == name), None
    )
    if store is None:
        return False, "AssetStoreNotFound", f"AssetStore {ns}/{name} does not exist"
    if store["metadata"].get("deletionTimestamp"):
        return (
            False,
            "AssetStoreDeleting",
            f"AssetStore {ns}/{name} is being deleted; it stays while this Website uses it",
        )
    return True, "AssetStoreFound", f"AssetStore {ns}/{name} exists"
