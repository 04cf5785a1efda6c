"""Exercise: Website web/gallery must refer to an AssetStore that exists.

The check resolves gallery's assetStoreRef with the controller's own rules against the AssetStores in web,
whatever gallery's status says. When the reference does not resolve, it also looks for an AssetStore of
that name in other namespaces: an assetStoreRef only reaches the Website's own namespace.
"""

import json
from collections.abc import Callable
from types import ModuleType

from krmcourse import CheckFailed, Lab


def _rules(lab: Lab) -> ModuleType:
    """The controller's own rules (controllers/references.py)."""
    return lab.support("controllers.references")


def check(lab: Lab) -> None:
    gallery = lab.get("websites.refs.krmcourse.dev", "gallery", namespace="web")
    if gallery is None:
        raise CheckFailed(
            "Website web/gallery is gone; the point is to repair its reference, not to remove it."
        )
    stores = lab.objects("assetstores.refs.krmcourse.dev", all_namespaces=True)
    ok, reason, message = _rules(lab).resolution(gallery, stores)
    if not ok:
        wanted = gallery["spec"]["assetStoreRef"]["name"]
        elsewhere = sorted(s["metadata"]["namespace"] for s in stores
                           if s["metadata"]["name"] == wanted and s["metadata"]["namespace"] != "web")
        if elsewhere:
            message += (f" (there is one in {', '.join(elsewhere)}, "
                        "but an assetStoreRef only reaches gallery's namespace)")
        conditions = (gallery.get("status") or {}).get("conditions") or []
        if any(c.get("type") == "AssetStoreResolved" and c.get("status") == "True" for c in conditions):
            message += (". Its status claims AssetStoreResolved=True, but a status reports the state; "
                        "it cannot make it so")
        raise CheckFailed(f"gallery's assetStoreRef does not resolve: {reason}: {message}.")


def solve(lab: Lab) -> None:
    lab.kubectl(
        "patch",
        "websites.refs.krmcourse.dev",
        "gallery",
        "-n",
        "web",
        "--type=merge",
        "-p",
        '{"spec": {"assetStoreRef": {"name": "media"}}}',
    )


def _write_resolved_into_the_status(lab: Lab) -> None:
    """Make gallery's status say AssetStoreResolved=True, and leave the reference dangling."""
    condition = {"type": "AssetStoreResolved", "status": "True", "reason": "AssetStoreFound",
                 "message": "AssetStore web/images exists", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    lab.kubectl("patch", "websites.refs.krmcourse.dev", "gallery", "-n", "web", "--subresource=status",
                "--type=merge", "-p", json.dumps({"status": {"conditions": [condition]}}))


def _create_the_store_in_the_default_namespace(lab: Lab) -> None:
    """Create the missing AssetStore images, but from a manifest without a namespace: it lands in default."""
    lab.kubectl("apply", "-n", "default", "-f", "-",
                input='{"apiVersion": "refs.krmcourse.dev/v1", "kind": "AssetStore", "metadata": {"name": "images"}}')


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "write AssetStoreResolved=True into gallery's status": _write_resolved_into_the_status,
    "create the AssetStore images in the default namespace": _create_the_store_in_the_default_namespace,
}
