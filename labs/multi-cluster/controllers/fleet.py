"""A multi-cluster controller: mirror labelled ConfigMaps from every member cluster to every other one.

Membership is a folder of kubeconfig files, one per cluster: ``<cluster>.kubeconfig``. Put a file
in to add a cluster while the controller runs; take it out to remove the cluster. For each member the
controller holds its own client and its own cache (one list+watch of ConfigMaps in the namespace),
built with an explicit kubeconfig, never the default one.

A ConfigMap labelled ``fleet.krmcourse.dev/mirror=true`` in cluster ``east`` is copied into every
other member as ``east-<name>``, labelled with its source. Reconcile keys carry the cluster, in the
style kcp uses: ``east|fleet/greeting``. When a source goes, or its cluster leaves, its copies go too.
A controller cannot clean up inside a cluster it has already forgotten, so copies *in* a cluster
that leaves stay there.

How a member is let go is a step of its own, ``let_go(fleet, name)``, loaded from the file given with
``--let-go`` (the notebook's exercise writes it; ``lab.save_code`` saves it).

Usage: fleet.py --clusters DIR --let-go FILE [--namespace fleet]
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client import Counter, Gauge

# The toolkit (counting client, informer, work queue) the good-citizens lab's controller is built on.
from krmcourse.controllerkit import (
    CONFIGMAPS,
    Client,
    Informer,
    WorkQueue,
    controller_main,
    log,
    run_loop,
    serve_metrics,
)
from krmcourse.labcode import script_module

MIRROR = "fleet.krmcourse.dev/mirror"
SOURCE = "fleet.krmcourse.dev/source-cluster"
SOURCE_NAME = "fleet.krmcourse.dev/source-name"

MEMBERS = Gauge("fleet_members", "Clusters the controller is connected to")
PER_CLUSTER = Counter("fleet_reconciles", "Reconciles, by the cluster in the request key", ["cluster"])


@dataclass
class Member:
    """One cluster: its own client, its own cache, and the task that keeps the cache current."""

    name: str
    kubeconfig: Path
    client: Client
    cache: Informer
    task: asyncio.Task[None] | None = None
    stamp: float = field(default=0.0)

    async def close(self) -> None:
        """Close this member's client: its HTTP connections, and kr8s's cached copy of it."""
        session = getattr(self.client.api, "_session", None)  # kr8s has no public close
        if session is not None:
            await session.aclose()
        forget_client(self.client.api)


def forget_client(api: object) -> None:
    """Drop a client from kr8s's cache, which is keyed by the kubeconfig path: a cluster that joins
    later under the same name may be a different cluster with different credentials."""
    from kr8s._api import Api  # private, like the cache itself

    for cache in Api._instances.values():
        for key, value in list(cache.items()):
            if value is api:
                del cache[key]


class Fleet:
    def __init__(self, folder: Path, namespace: str, let_go: Callable[..., object]) -> None:
        self.folder = folder
        self.ns = namespace
        self.members: dict[str, Member] = {}
        self.queue = WorkQueue()
        self.let_go = let_go
        self.kept: set[str] = set()  # let go of, yet still members: not asked again until they rejoin

    # ---- membership: watches are easy to add, and take care to remove
    async def add(self, name: str, kubeconfig: Path) -> None:
        import kr8s.asyncio

        # One client per cluster, from that cluster's kubeconfig: never the default client.
        api = await kr8s.asyncio.api(kubeconfig=str(kubeconfig))
        client = Client(api, cluster=name)
        cache = Informer(client, CONFIGMAPS, self.ns)
        member = Member(name, kubeconfig, client, cache, stamp=kubeconfig.stat().st_mtime)
        cache.handlers.append(lambda kind, old, new: self.on_event(name, old, new))
        member.task = asyncio.create_task(cache.run(), name=f"cache-{name}")
        self.members[name] = member
        self.kept.discard(name)
        MEMBERS.set(len(self.members))
        try:
            await asyncio.wait_for(cache.synced.wait(), timeout=20)
        except TimeoutError:
            await self.remove(name)
            raise
        log(f"joined {name}: {len(cache.store)} configmaps cached")
        for other in list(self.members.values()):  # the newcomer needs copies of everyone's sources
            if other.name != name:
                for obj in list(other.cache.store.values()):
                    self.enqueue_for(other.name, obj)

    async def remove(self, name: str) -> None:
        """A member leaves: the let-go step lets it go, then copies of its objects elsewhere are re-queued."""
        try:
            done = self.let_go(self, name)
            if inspect.isawaitable(done):
                await done
        except Exception as exc:  # noqa: BLE001 - a failing step must not stop the other members
            log(f"the let-go step for {name} raised {type(exc).__name__}: {exc}")
        MEMBERS.set(len(self.members))
        if name in self.members:
            self.kept.add(name)
            log(f"left {name}: the let-go step returned, but {name} is still a member")
            return
        log(f"left {name}: no longer a member, {len(self.members)} left")
        for other in self.members.values():  # copies of the leaver's objects now have no source
            for obj in list(other.cache.store.values()):
                if obj["metadata"].get("labels", {}).get(SOURCE) == name:
                    self.enqueue_for(other.name, obj)

    async def follow_folder(self) -> None:
        """Poll the membership folder (a local folder, not the API) and add or remove clusters."""
        while True:
            present = {p.stem: p for p in sorted(self.folder.glob("*.kubeconfig"))}
            for name in [n for n in self.members if n not in present and n not in self.kept]:
                await self.remove(name)
            for name, path in present.items():
                member = self.members.get(name)
                if member is not None and member.stamp != path.stat().st_mtime:
                    await self.remove(name)  # a new credential or a new cluster behind the same name
                    member = None
                if member is None:
                    try:
                        await self.add(name, path)
                    except Exception as exc:  # noqa: BLE001 - a bad member must not stop the others
                        self.members.pop(name, None)
                        log(f"could not join {name}: {type(exc).__name__}: {exc}")
            await asyncio.sleep(0.5)

    # ---- events -> cluster-aware keys
    def enqueue_for(self, cluster: str, obj: dict) -> None:
        meta = obj["metadata"]
        labels = meta.get("labels") or {}
        if labels.get(MIRROR) == "true":
            self.queue.add(f"{cluster}|{meta['namespace']}/{meta['name']}")
        elif SOURCE in labels and SOURCE_NAME in labels:  # a copy changed: check it against its source
            self.queue.add(f"{labels[SOURCE]}|{meta['namespace']}/{labels[SOURCE_NAME]}")

    def on_event(self, cluster: str, old: dict | None, new: dict | None) -> None:
        for obj in (old, new):  # old too: a source that lost its label must lose its copies
            if obj is not None:
                self.enqueue_for(cluster, obj)

    # ---- reconcile one key, "cluster|namespace/name"
    async def reconcile(self, key: str) -> float | None:
        cluster, _, rest = key.partition("|")
        ns, _, name = rest.partition("/")
        PER_CLUSTER.labels(cluster).inc()
        if any(not m.cache.synced.is_set() for m in self.members.values()):
            return 0.2  # never act on a half-filled cache
        source = None
        if cluster in self.members:
            source = self.members[cluster].cache.store.get(f"{ns}/{name}")
            if source is not None and (source["metadata"].get("labels") or {}).get(MIRROR) != "true":
                source = None
        copy_name = f"{cluster}-{name}"
        for target in list(self.members.values()):
            if target.name == cluster:
                continue
            have = target.cache.store.get(f"{ns}/{copy_name}")
            if source is None:
                if have is not None:
                    gone = await target.client.delete(CONFIGMAPS, ns, copy_name)
                    log(f"reconcile {key} -> {target.name}: {'deleted' if gone else 'missed'} {ns}/{copy_name}"
                        f" at {target.client.api.auth.server}")
                continue
            data = source.get("data") or {}
            if have is None:
                body = {"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": copy_name, "namespace": ns,
                                     "labels": {SOURCE: cluster, SOURCE_NAME: name}},
                        "data": data}
                await target.client.create(CONFIGMAPS, ns, body)
                log(f"reconcile {key} -> {target.name}: created {ns}/{copy_name}")
            elif (have.get("data") or {}) != data:
                await target.client.patch(CONFIGMAPS, ns, copy_name, {"data": data})
                log(f"reconcile {key} -> {target.name}: updated {ns}/{copy_name}")
        return None


async def main(argv: list[str]) -> None:
    serve_metrics()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--clusters", type=Path, required=True, help="folder of <cluster>.kubeconfig files")
    p.add_argument("--let-go", type=Path, required=True, help="a Python file that defines let_go(fleet, name)")
    p.add_argument("--namespace", default="fleet")
    args = p.parse_args(argv)
    if not args.clusters.is_dir():
        p.error(f"--clusters {args.clusters} is not a folder; create it and put <cluster>.kubeconfig files in it")
    let_go = getattr(script_module(args.let_go), "let_go", None) if args.let_go.is_file() else None
    if not callable(let_go):
        p.error(f"--let-go {args.let_go} does not define a function let_go(fleet, name); save one with "
                "lab.save_code('let-go', let_go)")
    fleet = Fleet(args.clusters, args.namespace, let_go)
    log(f"following {args.clusters}")
    await asyncio.gather(fleet.follow_folder(), run_loop("mirror", fleet.queue, fleet.reconcile))


if __name__ == "__main__":
    controller_main(main(sys.argv[1:]))
