"""Wiring: two informers feed one work queue, and a few workers drain it through reconcile().

Greetings map to their own key. ConfigMaps the controller owns map to their owner's key, so deleting
or editing an owned ConfigMap wakes the Greeting that should have it, and the reconcile repairs it.
"""

from __future__ import annotations

import asyncio
import logging
import signal

import kr8s
from kr8s.asyncio import Api

from .informer import Informer, Resource, WatchLoop
from .model import API_VERSION, KIND, OWNER_LABEL, PLURAL, Key, Obj, key_of
from .reconcile import reconcile
from .workqueue import WorkQueue

MANAGER = "greeter-scratch"


def owner_key(configmap: Obj) -> Key | None:
    """The key of the Greeting that controls this ConfigMap, from its controller ownerReference."""
    for ref in configmap["metadata"].get("ownerReferences", []):
        if ref.get("controller") and ref.get("kind") == KIND and ref.get("apiVersion") == API_VERSION:
            return configmap["metadata"]["namespace"], ref["name"]
    return None


class Controller:
    def __init__(
        self,
        api: Api,
        log: logging.Logger,
        namespace: str | None = None,
        workers: int = 2,
        watch_timeout: int = 300,
        work_delay: float = 0.0,
        watch_loop: WatchLoop | None = None,
    ) -> None:
        self.api = api
        self.watch_loop = watch_loop
        self.log = log
        self.workers = workers
        self.work_delay = work_delay
        self.queue: WorkQueue[Key] = WorkQueue()
        self.reconciles = 0
        self.greetings = Informer(
            api,
            Resource(API_VERSION, PLURAL),
            self._greeting_changed,
            log,
            namespace=namespace,
            watch_timeout=watch_timeout,
        )
        self.configmaps = Informer(
            api,
            Resource("v1", "configmaps"),
            self._configmap_changed,
            log,
            namespace=namespace,
            label_selector=OWNER_LABEL,
            watch_timeout=watch_timeout,
        )

    def _greeting_changed(self, greeting: Obj) -> None:
        self.queue.add(key_of(greeting))

    def _configmap_changed(self, configmap: Obj) -> None:
        key = owner_key(configmap)
        if key is not None:
            self.queue.add(key)

    async def _get_configmap(self, namespace: str, name: str) -> Obj | None:
        return self.configmaps.cache.get((namespace, name))

    async def _worker(self, number: int) -> None:
        while True:
            key = await self.queue.get()
            try:
                greeting = self.greetings.cache.get(key)
                if greeting is None:
                    self.log.info("%s/%s: gone from the cache; nothing to do", *key)
                    continue
                if self.work_delay:
                    await asyncio.sleep(self.work_delay)  # lets the lab kill the controller mid-work
                outcome = await reconcile(self.api, greeting, self._get_configmap, MANAGER, self.log)
                self.reconciles += 1
                self.queue.forget(key)
                self.log.info("%s/%s: reconciled (%s) by worker %d", *key, outcome, number)
            except (kr8s.ServerError, kr8s.APITimeoutError) as error:
                delay = self.queue.retry_delay(key)
                self.log.warning("%s/%s: %s; retrying in %.1fs", *key, error, delay)
                self.queue.add_after(key, delay)
            finally:
                self.queue.done(key)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        tasks = [
            asyncio.create_task(self.greetings.run(self.watch_loop)),
            asyncio.create_task(self.configmaps.run(self.watch_loop)),
        ]
        await self.greetings.synced.wait()
        await self.configmaps.synced.wait()
        self.log.info(
            "caches synced: %d greetings, %d owned configmaps; starting %d workers",
            len(self.greetings.cache),
            len(self.configmaps.cache),
            self.workers,
        )
        tasks += [asyncio.create_task(self._worker(n)) for n in range(self.workers)]
        stop = asyncio.Event()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        loop.add_signal_handler(signal.SIGINT, stop.set)
        await stop.wait()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.log.info(
            "stopped after %d reconciles; queue saw %d adds, %d de-duplicated; %d lists",
            self.reconciles,
            self.queue.added,
            self.queue.deduplicated,
            self.greetings.lists + self.configmaps.lists,
        )
