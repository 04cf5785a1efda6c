"""A controller cache of Secrets, built in one of three ways, to measure what a cache costs (G6).

--cache all        list+watch every Secret in the namespace, whole (what an unconfigured cache does)
--cache selector   list+watch only the Secrets with the label it needs (a server-side label selector)
--cache metadata   list+watch every Secret as PartialObjectMetadata: names, labels, owners, no data

It reports its cache in its own metrics (controller_cache_objects, controller_cache_bytes) and its
process memory (process_resident_memory_bytes, from prometheus_client's process collector), and
logs "synced" once the cache is full. Run it with KUBECONFIG set; ``lab.run_controller`` does that.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import sys
import time
import warnings
from collections.abc import Awaitable, Callable

from prometheus_client import Gauge, start_http_server

SELECTOR = "citizens.krmcourse.dev/cache=true"
METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
METADATA_ONE = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"

CACHE_OBJECTS = Gauge("controller_cache_objects", "Objects held in the cache", ["resource"])
CACHE_BYTES = Gauge("controller_cache_bytes", "JSON size of the objects held in the cache", ["resource"])


class SecretCache:
    """List, then watch from the list's resourceVersion, keeping every object (or its metadata) in a dict."""

    def __init__(self, api: object, namespace: str | None, selector: str | None = None,
                 metadata_only: bool = False, on_change: Callable[[], Awaitable[None]] | None = None) -> None:
        self.api = api
        self.namespace = namespace  # None: every namespace
        self.params = {"labelSelector": selector} if selector else {}
        self.metadata_only = metadata_only
        self.on_change = on_change  # called after the list and after every change the watch brings
        self.store: dict[str, dict] = {}
        self.sizes: dict[str, int] = {}

    @staticmethod
    def key(obj: dict) -> str:
        return f"{obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}"

    def _keep(self, obj: dict) -> None:
        self.store[self.key(obj)] = obj
        self.sizes[self.key(obj)] = len(json.dumps(obj))

    def _report(self) -> None:
        CACHE_OBJECTS.labels("secrets").set(len(self.store))
        CACHE_BYTES.labels("secrets").set(sum(self.sizes.values()))

    async def list(self) -> str:
        headers = {"Accept": METADATA_LIST} if self.metadata_only else {}
        async with self.api.call_api("GET", version="v1", namespace=self.namespace,  # type: ignore[attr-defined]
                                     url="secrets", params=self.params, headers=headers) as response:
            listed = response.json()
        self.store.clear()
        self.sizes.clear()
        for obj in listed.get("items") or []:
            self._keep(obj)
        self._report()
        if self.on_change:
            await self.on_change()
        return str(listed["metadata"]["resourceVersion"])

    async def watch(self, version: str) -> None:
        headers = {"Accept": METADATA_ONE} if self.metadata_only else {}
        params = {**self.params, "watch": "true", "resourceVersion": version, "allowWatchBookmarks": "true"}
        while True:
            async with self.api.call_api("GET", version="v1", namespace=self.namespace,  # type: ignore[attr-defined]
                                         url="secrets", params=params, headers=headers, stream=True,
                                         timeout=None) as response:
                async for line in response.aiter_lines():
                    if not line:
                        continue
                    event = json.loads(line)
                    obj = event["object"]
                    if event["type"] == "ERROR":  # too old: list again, then carry on watching
                        params["resourceVersion"] = await self.list()
                        break
                    params["resourceVersion"] = obj["metadata"]["resourceVersion"]
                    if event["type"] == "BOOKMARK":
                        continue
                    if event["type"] == "DELETED":
                        self.store.pop(self.key(obj), None)
                        self.sizes.pop(self.key(obj), None)
                    else:
                        self._keep(obj)
                    self._report()
                    if self.on_change:
                        await self.on_change()


async def main(argv: list[str]) -> None:
    server, _ = start_http_server(0, addr="127.0.0.1")  # metrics first, before any work
    print(f"metrics: http://127.0.0.1:{server.server_port}/metrics", flush=True)
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--namespace", default="vault")
    p.add_argument("--cache", choices=["all", "selector", "metadata"], required=True)
    args = p.parse_args(argv)
    warnings.filterwarnings("ignore", message="Kubernetes version .* is not supported")
    import kr8s.asyncio

    api = await kr8s.asyncio.api(kubeconfig=os.environ["KUBECONFIG"])
    cache = SecretCache(api, args.namespace, selector=SELECTOR if args.cache == "selector" else None,
                        metadata_only=args.cache == "metadata")
    version = await cache.list()
    gc.collect()  # count what the cache keeps, not the garbage the list left behind
    print(time.strftime("%H:%M:%S"), f"synced: {len(cache.store)} secrets cached ({args.cache})", flush=True)
    await cache.watch(version)


if __name__ == "__main__":
    try:
        asyncio.run(main(sys.argv[1:]))
    except KeyboardInterrupt:
        sys.exit(0)
