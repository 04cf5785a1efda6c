"""The checksum controller: a checksum of every Secret labelled citizens.krmcourse.dev/cache=true (G6).

Workloads that mount such a Secret are rolled when its checksum changes, the way reloader-style tools
do it. It keeps the checksums in ConfigMap vault/secret-checksums (one key per Secret,
``<namespace>.<name>``), applied whole with server-side apply, so a key it no longer sends goes away.

What its cache of Secrets lists and watches comes from ``cache_options()`` in the file given with
``--cache-code`` (saved by ``lab.save_code``), a dict with these keys:

    namespace       one namespace to list and watch, or None for the whole cluster
    label_selector  a label selector the API server applies, or None for every Secret
    metadata_only   True to list and watch PartialObjectMetadata: names and labels, no data

Without ``--cache-code`` it does what an unconfigured cache does: every Secret of the cluster, whole.
It picks the labelled Secrets out of its cache itself, whatever the cache holds. It reports the cache in
its own metrics (controller_cache_objects, controller_cache_bytes) and logs "synced" once it is full.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from secretcache import synced_cache

from krmcourse.controllerkit import Informer, WorkQueue, controller_main, log, run_loop, serve_metrics
from krmcourse.labcode import lab_module, saved_function

LAB = Path(__file__).resolve().parent.parent
LABEL, VALUE = "citizens.krmcourse.dev/cache", "true"
CONFIGMAP, NAMESPACE = "secret-checksums", "vault"
MANAGER = "checksummer"
#: What an unconfigured cache lists and watches.
EVERYTHING = {"namespace": None, "label_selector": None, "metadata_only": False}


def options(code: str | None) -> dict[str, Any]:
    """The learner's cache_options(), checked, or EVERYTHING without a file."""
    if not code:
        return dict(EVERYTHING)
    chosen = saved_function(Path(code), "cache_options")()
    if not isinstance(chosen, dict) or set(chosen) - set(EVERYTHING):
        sys.exit(f"cache_options() must return a dict with some of the keys {sorted(EVERYTHING)}; "
                 f"it returned {chosen!r}.")
    return {**EVERYTHING, **chosen}


class Checksummer:
    """Applies the checksums of the labelled Secrets in the cache whenever they change."""

    def __init__(self, api: Any, cache: Informer) -> None:
        self.api = api
        self.cache = cache
        self.applied: dict[str, str] | None = None
        self.told: set[str] = set()  # Secrets it said it cannot checksum, said once each
        self.support = lab_module("writes-and-caches", "writes_and_caches", LAB)

    def wanted(self) -> dict[str, str]:
        sums = {}
        for obj in self.cache.store.values():
            meta = obj["metadata"]
            if (meta.get("labels") or {}).get(LABEL) != VALUE:
                continue
            key = self.support.checksum_key(obj)
            if self.cache.metadata_only:  # PartialObjectMetadata: there is no data to sum
                if key not in self.told:
                    print(f"cannot checksum {key}: the cache holds its metadata only", flush=True)
                    self.told.add(key)
                continue
            sums[key] = self.support.checksum(obj.get("data") or {})
        return sums

    async def reconcile(self, _key: str = "") -> None:
        """One reconcile for the whole ConfigMap, whichever Secret changed."""
        sums = self.wanted()
        if sums == self.applied:
            return
        body = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": CONFIGMAP, "namespace": NAMESPACE}, "data": sums}
        async with self.api.call_api("PATCH", version="v1", namespace=NAMESPACE, url=f"configmaps/{CONFIGMAP}",
                                     params={"fieldManager": MANAGER, "force": "true"},
                                     headers={"Content-Type": "application/apply-patch+yaml"},
                                     json=body):
            pass
        self.applied = sums
        log(f"applied {len(sums)} checksums")


async def main(argv: list[str]) -> None:
    serve_metrics()  # metrics first, before any work
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cache-code", help="a file with cache_options(), saved by lab.save_code")
    args = p.parse_args(argv)
    chosen = options(args.cache_code)
    api, cache, watching = await synced_cache(chosen["namespace"], chosen["label_selector"],
                                              bool(chosen["metadata_only"]))
    controller = Checksummer(api, cache)
    queue = WorkQueue()
    cache.handlers.append(lambda *_change: queue.add(CONFIGMAP))
    queue.add(CONFIGMAP)  # the first reconcile, for what the list brought
    log(f"synced: {len(cache.store)} secrets cached with {chosen}")
    await asyncio.gather(watching, run_loop("checksums", queue, controller.reconcile))


if __name__ == "__main__":
    controller_main(main(sys.argv[1:]))
