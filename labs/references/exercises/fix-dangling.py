"""Exercise: Website web/gallery must refer to its own AssetStore again.

``reflab.move_gallery_store`` gives gallery a store of its own, with a name and size drawn per cluster, and
moves that store to the ``archive`` namespace by mistake: gallery's reference dangles. The check resolves
gallery's assetStoreRef with the controller's own rules against the AssetStores in web, whatever gallery's
status says, and wants the store it reaches to be gallery's own (used by no other Website, as large as the
one that moved). Pointing gallery at ``media``, the one store the page names, reaches blog's store.
"""

import json
from collections.abc import Callable
from types import ModuleType

from krmcourse import CheckFailed, Lab

STORES, SITES = "assetstores.refs.krmcourse.dev", "websites.refs.krmcourse.dev"


def _rules(lab: Lab) -> ModuleType:
    """The controller's own rules (controllers/references.py)."""
    return lab.support("controllers.references")


def check(lab: Lab) -> None:
    moved = lab.support("reflab").moved_store(lab)
    if not moved:
        raise CheckFailed("gallery's own AssetStore has not been moved yet: the exercise's first cell has not run "
                          "since the lab started.")
    gallery = lab.get(SITES, "gallery", namespace="web")
    if gallery is None:
        raise CheckFailed(
            "Website web/gallery is gone; the point is to repair its reference, not to remove it."
        )
    stores = lab.objects(STORES, all_namespaces=True)
    ok, reason, message = _rules(lab).resolution(gallery, stores)
    wanted = gallery["spec"]["assetStoreRef"]["name"]
    if not ok:
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
    others = [w["metadata"]["name"] for w in lab.objects(SITES, "web")
              if w["metadata"]["name"] != "gallery" and w["spec"].get("assetStoreRef", {}).get("name") == wanted]
    if others:
        raise CheckFailed(
            f"gallery now resolves, but to the AssetStore that {', '.join(others)} uses: gallery's assets are not "
            "in it. Its own store still exists somewhere in the cluster; a reference only reaches gallery's "
            "namespace.")
    store = next(s for s in stores if s["metadata"]["name"] == wanted and s["metadata"]["namespace"] == "web")
    size = int(store.get("spec", {}).get("sizeGiB", 1))
    if size < int(moved["sizeGiB"]):
        raise CheckFailed(f"gallery resolves to AssetStore web/{wanted} of {size} GiB, smaller than the store "
                          "it lost: gallery's assets would not fit. The store that went astray says how large "
                          "it is.")


def solve(lab: Lab) -> None:
    reflab = lab.support("reflab")
    reflab.move_gallery_store(lab)
    # gallery's status names the store it cannot find; AssetStores listed in every namespace show where it
    # went (archive). A reference reaches only gallery's namespace, so the store is made again in web, as large.
    astray = lab.objects(STORES, reflab.ARCHIVE)[0]
    name = astray["metadata"]["name"]
    lab.apply({"apiVersion": "refs.krmcourse.dev/v1", "kind": "AssetStore",
               "metadata": {"name": name, "namespace": "web"}, "spec": {"sizeGiB": astray["spec"]["sizeGiB"]}})
    lab.kubectl("patch", SITES, "gallery", "-n", "web", "--type=merge",  # in case an earlier try repointed it
                "-p", json.dumps({"spec": {"assetStoreRef": {"name": name}}}))


def _point_it_at_media(lab: Lab) -> None:
    """The answer the page once gave: point gallery at media, the other store the page names."""
    lab.support("reflab").move_gallery_store(lab)
    lab.kubectl("patch", SITES, "gallery", "-n", "web", "--type=merge",
                "-p", '{"spec": {"assetStoreRef": {"name": "media"}}}')


def _create_images(lab: Lab) -> None:
    """The other answer the page once gave: create an AssetStore images in web, and point gallery at it."""
    lab.support("reflab").move_gallery_store(lab)
    lab.apply({"apiVersion": "refs.krmcourse.dev/v1", "kind": "AssetStore",
               "metadata": {"name": "images", "namespace": "web"}})
    lab.kubectl("patch", SITES, "gallery", "-n", "web", "--type=merge",
                "-p", '{"spec": {"assetStoreRef": {"name": "images"}}}')


def _write_resolved_into_the_status(lab: Lab) -> None:
    """Make gallery's status say AssetStoreResolved=True, and leave the reference dangling."""
    reflab = lab.support("reflab")
    reflab.move_gallery_store(lab)
    name = reflab.moved_store(lab)["name"]
    lab.kubectl("patch", SITES, "gallery", "-n", "web", "--type=merge",
                "-p", json.dumps({"spec": {"assetStoreRef": {"name": name}}}))
    condition = {"type": "AssetStoreResolved", "status": "True", "reason": "AssetStoreFound",
                 "message": f"AssetStore web/{name} exists", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    lab.kubectl("patch", SITES, "gallery", "-n", "web", "--subresource=status",
                "--type=merge", "-p", json.dumps({"status": {"conditions": [condition]}}))


def _create_the_store_in_the_default_namespace(lab: Lab) -> None:
    """Create the missing AssetStore from a manifest without a namespace: it lands in default."""
    name = lab.support("reflab").moved_store(lab)["name"]
    lab.kubectl("apply", "-n", "default", "-f", "-",
                input=json.dumps({"apiVersion": "refs.krmcourse.dev/v1", "kind": "AssetStore",
                                  "metadata": {"name": name}}))


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "copied from the page: point gallery at media": _point_it_at_media,
    "copied from the page: create the AssetStore images": _create_images,
    "write AssetStoreResolved=True into gallery's status": _write_resolved_into_the_status,
    "create the missing AssetStore in the default namespace": _create_the_store_in_the_default_namespace,
}
