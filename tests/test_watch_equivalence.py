"""Notebook 03's hand-built informer and the package's toolkit keep the same cache, whatever the watch does.

Both run against a real cluster through :class:`krmcourse.faultproxy.ApiFaults`, and meet the same events:
ConfigMaps made, changed and deleted between a 410 Gone, a watch broken off, and a watch the server
ends cleanly. After each step both caches must equal what a fresh list says (every key at its
resourceVersion). A client that keeps its expired resourceVersion, as kr8s's own watch does, is shown
to fail the same steps: the check can fail.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import kr8s.asyncio
import pytest
import stubborn  # tests/stubborn.py

from krmcourse import Lab, controllerkit
from krmcourse.faultproxy import ApiFaults
from krmcourse.labcode import lab_module

pytestmark = pytest.mark.cluster
NAMESPACE = "eq"
Cache = dict[tuple[str, str], str]


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    lab = Lab("sandbox", instance="watch-eq", say=lambda _m: None).up()
    lab.kubectl("create", "namespace", NAMESPACE)
    yield lab
    lab.down()


def versions(objects: Any) -> Cache:
    return {(o["metadata"].get("namespace", ""), o["metadata"]["name"]): o["metadata"]["resourceVersion"]
            for o in objects}


def truth(lab: Lab) -> Cache:
    return versions(json.loads(lab.kubectl("get", "configmaps", "-n", NAMESPACE, "-o", "json"))["items"])


async def settled(lab: Lab, caches: dict[str, Callable[[], Cache]], timeout: float = 30) -> None:
    """Wait until every cache equals a fresh list; fail naming the caches that differ."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        want = await asyncio.to_thread(truth, lab)
        differ = {name: cache() for name, cache in caches.items() if cache() != want}
        if not differ:
            return
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail(f"after {timeout:.0f} s these caches still differ from a fresh list {want}: {differ}")
        await asyncio.sleep(0.2)


async def watching(faults: ApiFaults, count: int, timeout: float = 30) -> None:
    """Wait until ``count`` watches are open: a client that has just re-listed opens its next one a moment later."""
    deadline = asyncio.get_running_loop().time() + timeout
    while faults.open_watches() < count:
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail(f"only {faults.open_watches()} of {count} watches are open after {timeout:.0f} s")
        await asyncio.sleep(0.05)


async def steps(lab: Lab, faults: ApiFaults, caches: dict[str, Callable[[], Cache]]) -> None:
    """The one sequence of events every cache meets."""

    async def kubectl(*args: str) -> None:
        await asyncio.to_thread(lab.kubectl, *args, "-n", NAMESPACE)

    await kubectl("create", "configmap", "a", "--from-literal=v=1")
    await kubectl("create", "configmap", "b", "--from-literal=v=1")
    await settled(lab, caches)

    await watching(faults, len(caches))
    assert faults.expire_watches() >= len(caches)
    await kubectl("patch", "configmap", "a", "-p", '{"data": {"v": "2"}}')
    await kubectl("delete", "configmap", "b")
    await kubectl("create", "configmap", "c", "--from-literal=v=1")
    await settled(lab, caches)

    await watching(faults, len(caches))
    assert faults.cut_watches() >= len(caches)
    await kubectl("patch", "configmap", "c", "-p", '{"data": {"v": "2"}}')
    await kubectl("create", "configmap", "d", "--from-literal=v=1")
    await settled(lab, caches)

    await watching(faults, len(caches))
    assert faults.cut_watches(cleanly=True) >= len(caches)
    await kubectl("delete", "configmap", "a")
    await settled(lab, caches)


async def _both(lab: Lab, faults: ApiFaults) -> None:
    api = await kr8s.asyncio.api(kubeconfig=str(faults.kubeconfig))
    informer = lab_module("controllers", "greeter.informer")
    teaching = informer.Informer(api, informer.Resource("v1", "configmaps"), on_change=lambda _obj: None,
                                 log=logging.getLogger("greeter"), namespace=NAMESPACE)
    toolkit = controllerkit.Informer(controllerkit.Client(api), controllerkit.CONFIGMAPS, NAMESPACE)
    tasks = [asyncio.create_task(teaching.run()), asyncio.create_task(toolkit.run())]
    try:
        await asyncio.wait_for(asyncio.gather(teaching.synced.wait(), toolkit.synced.wait()), 30)
        await steps(lab, faults, {"notebook 03's informer": lambda: versions(teaching.cache.values()),
                                  "controllerkit.Informer": lambda: versions(toolkit.store.values())})
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    assert faults.counts["expired"] >= 2 and faults.counts["cut"] >= 2 and faults.counts["clean"] >= 2, faults.counts


def test_the_teaching_informer_and_the_toolkit_keep_the_same_cache(lab: Lab) -> None:
    with ApiFaults(lab.kubeconfig, lab.home) as faults:
        asyncio.run(_both(lab, faults))


async def _stubborn(lab: Lab, faults: ApiFaults) -> None:
    api = await kr8s.asyncio.api(kubeconfig=str(faults.kubeconfig))
    cache: dict[tuple[str, str], dict[str, Any]] = {}

    async def follow() -> None:
        async for kind, obj in stubborn.list_then_watch(controllerkit.Client(api), controllerkit.CONFIGMAPS,
                                                        NAMESPACE):
            if kind == "LIST":
                cache.update({(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in obj["items"]})
            elif kind == "DELETED":
                cache.pop((obj["metadata"]["namespace"], obj["metadata"]["name"]), None)
            else:
                cache[(obj["metadata"]["namespace"], obj["metadata"]["name"])] = obj

    task = asyncio.create_task(follow())
    try:
        await steps(lab, faults, {"stubborn": lambda: versions(cache.values())})
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def test_a_client_that_keeps_its_expired_version_is_caught(lab: Lab) -> None:
    lab.kubectl("delete", "configmaps", "a", "b", "c", "d", "--ignore-not-found", "-n", NAMESPACE)
    with ApiFaults(lab.kubeconfig, lab.home) as faults, pytest.raises(pytest.fail.Exception) as caught:
        asyncio.run(_stubborn(lab, faults))
    assert "still differ" in str(caught.value) and "stubborn" in str(caught.value)
