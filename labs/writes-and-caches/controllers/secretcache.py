"""A controller cache of Secrets, built in one of three ways, to measure what a cache costs (G6).

--cache all        list+watch every Secret in the namespace, whole (what an unconfigured cache does)
--cache selector   list+watch only the Secrets with the label it needs (a server-side label selector)
--cache metadata   list+watch every Secret as PartialObjectMetadata: names, labels, owners, no data

The cache is the course toolkit's informer (krmcourse.controllerkit), as every controller's is. It
reports itself in the process's own metrics (controller_cache_objects, controller_cache_bytes) beside
the process memory (process_resident_memory_bytes, from prometheus_client's process collector), and
logs "synced" once the cache is full. Run it with KUBECONFIG set; ``lab.run_controller`` does that.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
from typing import Any

from krmcourse.controllerkit import Client, Informer, Resource, controller_main, log, serve_metrics

SELECTOR = "citizens.krmcourse.dev/cache=true"
SECRETS = Resource("", "v1", "secrets")


async def synced_cache(namespace: str | None, label_selector: str | None = None,
                       metadata_only: bool = False) -> tuple[Any, Informer, asyncio.Task[None]]:
    """A Secret informer listed and watching: (the kr8s api, the informer, the task that keeps it current)."""
    import kr8s.asyncio

    api = await kr8s.asyncio.api(kubeconfig=os.environ["KUBECONFIG"])
    cache = Informer(Client(api), SECRETS, namespace, label_selector, metadata_only)
    watching = asyncio.create_task(cache.run())
    await cache.synced.wait()
    gc.collect()  # count what the cache keeps, not the garbage the list left behind
    return api, cache, watching


async def main(argv: list[str]) -> None:
    serve_metrics()  # metrics first, before any work
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--namespace", default="vault")
    p.add_argument("--cache", choices=["all", "selector", "metadata"], required=True)
    args = p.parse_args(argv)
    _, cache, watching = await synced_cache(args.namespace, SELECTOR if args.cache == "selector" else None,
                                            metadata_only=args.cache == "metadata")
    log(f"synced: {len(cache.store)} secrets cached ({args.cache})")
    await watching


if __name__ == "__main__":
    controller_main(main(sys.argv[1:]))
