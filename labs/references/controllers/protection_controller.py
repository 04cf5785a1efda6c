"""Reference controller for the references lab: asset-store protection, modelled on Kubernetes' pvc-protection.

* Every AssetStore carries the finalizer refs.krmcourse.dev/assetstore-protection (Kubernetes adds
  kubernetes.io/pvc-protection at admission instead, which closes the short window before a
  controller's first pass; this lab keeps it in one controller for clarity).
* When an AssetStore is deleted, the finalizer stays until no live Website refers to it; then it goes
  and the API server finishes the deletion.
* AssetStores report who uses them (status.usedBy); Websites report whether their reference resolves.
"""

from __future__ import annotations

import kr8s
from references import FINALIZER, resolution, users

from krmcourse.conditions import condition, merge_conditions, same_status
from krmcourse.passloop import log, objects, put_status, raw, run


def reconcile_all(api: kr8s.Api) -> None:
    store_objs = list(objects(api, "assetstores.refs.krmcourse.dev"))
    website_objs = list(objects(api, "websites.refs.krmcourse.dev"))
    stores = [raw(s) for s in store_objs]
    websites = [raw(w) for w in website_objs]
    for obj, store in zip(store_objs, stores, strict=True):
        meta = store["metadata"]
        finalizers = meta.get("finalizers", [])
        used_by = users(store, websites)
        if meta.get("deletionTimestamp"):
            if FINALIZER in finalizers and not used_by:
                rest = [f for f in finalizers if f != FINALIZER]
                obj.patch({"metadata": {"finalizers": rest, "resourceVersion": meta["resourceVersion"]}})
                log.info(
                    "AssetStore %s/%s is unused: protection removed, deletion proceeds", obj.namespace, obj.name
                )
                continue
        elif FINALIZER not in finalizers:
            obj.patch(
                {
                    "metadata": {
                        "finalizers": [*finalizers, FINALIZER],
                        "resourceVersion": meta["resourceVersion"],
                    }
                }
            )
            log.info("AssetStore %s/%s is now protected", obj.namespace, obj.name)
        if store.get("status", {}).get("usedBy") != used_by:
            put_status(obj, {"usedBy": used_by})
            log.info("AssetStore %s/%s is used by %s", obj.namespace, obj.name, used_by or "nobody")
    for obj, website in zip(website_objs, websites, strict=True):
        ok, reason, message = resolution(website, stores)
        old = website.get("status", {})
        cond = condition("AssetStoreResolved", ok, reason, message, website["metadata"].get("generation"))
        new = {"conditions": merge_conditions(old.get("conditions", []), [cond])}
        if not same_status(old, new):
            put_status(obj, new)
            log.info("Website %s/%s: %s", obj.namespace, obj.name, message)


if __name__ == "__main__":
    run("protector", reconcile_all, watch=["assetstores.refs.krmcourse.dev", "websites.refs.krmcourse.dev"])
