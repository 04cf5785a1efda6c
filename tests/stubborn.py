"""A list+watch with the bug kr8s's own watch has (kr8s-org/kr8s#476): after a 410 Gone it watches again
from the same, expired resourceVersion, so it never hears of anything again.

The same signature as :func:`krmcourse.controllerkit.list_then_watch`, so that a test can put it in its
place, in its own process (tests/test_faults.py) or called directly (tests/test_watch_equivalence.py),
and show that the fault harness catches the bug.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from krmcourse import controllerkit


async def list_then_watch(client: controllerkit.Client, res: controllerkit.Resource, namespace: str | None = None,
                          label_selector: str | None = None,
                          metadata_only: bool = False) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    listed = await client.list(res, namespace, label_selector, metadata_only)
    version = listed["metadata"]["resourceVersion"]
    yield "LIST", listed
    while True:
        async for event in client.watch(res, namespace, version, label_selector, metadata_only):
            if event["type"] == "ERROR":
                await asyncio.sleep(0.2)
                break
            version = event["object"]["metadata"]["resourceVersion"]
            if event["type"] != "BOOKMARK":
                yield event["type"], event["object"]
