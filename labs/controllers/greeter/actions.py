"""The writes both controllers make, as plain HTTP calls through a kr8s async client.

Only kr8s's transport is used (authentication, TLS, the base URL). The request paths are spelled
out, so a reader sees exactly which REST calls a controller makes: a list, a watch, a create, a
merge patch, a patch of the status subresource, and an Event.
"""

from __future__ import annotations

import json
import os
import socket
from datetime import UTC, datetime
from typing import Any

import kr8s
from kr8s.asyncio import Api

from .model import (
    API_VERSION,
    FINALIZER,
    INDEX_NAME,
    INDEX_NAMESPACE,
    KIND,
    PLURAL,
    Obj,
    index_key,
)

MERGE_PATCH = {"Content-Type": "application/merge-patch+json"}


def status_code(error: kr8s.ServerError) -> int | None:
    return error.response.status_code if error.response is not None else None


async def request(
    api: Api,
    method: str,
    version: str,
    url: str,
    namespace: str | None = None,
    body: Obj | None = None,
    params: dict[str, str] | None = None,
    field_manager: str | None = None,
) -> Obj:
    """One REST call; merge-patch content type for PATCH. Raises kr8s.ServerError on 4xx/5xx."""
    kwargs: dict[str, Any] = {"params": dict(params or {})}
    if field_manager and method in {"POST", "PATCH", "PUT"}:
        kwargs["params"]["fieldManager"] = field_manager
    if body is not None:
        kwargs["content"] = json.dumps(body)
    if method == "PATCH":
        kwargs["headers"] = MERGE_PATCH
    async with api.call_api(method, version=version, url=url, namespace=namespace, **kwargs) as response:
        return response.json()


async def get_greeting(api: Api, namespace: str, name: str) -> Obj | None:
    try:
        return await request(api, "GET", API_VERSION, f"{PLURAL}/{name}", namespace)
    except kr8s.ServerError as error:
        if status_code(error) == 404:
            return None
        raise


async def patch_greeting(api: Api, greeting: Obj, patch: Obj, manager: str, status: bool = False) -> Obj:
    """Merge-patch a Greeting (or its status subresource). Callers put metadata.resourceVersion in
    the patch when they need optimistic concurrency: a stale copy then fails with 409 Conflict."""
    meta = greeting["metadata"]
    url = f"{PLURAL}/{meta['name']}" + ("/status" if status else "")
    return await request(api, "PATCH", API_VERSION, url, meta["namespace"], patch, field_manager=manager)


async def add_finalizer(api: Api, greeting: Obj, manager: str) -> Obj:
    meta = greeting["metadata"]
    finalizers = [*meta.get("finalizers", []), FINALIZER]
    patch = {"metadata": {"finalizers": finalizers, "resourceVersion": meta["resourceVersion"]}}
    return await patch_greeting(api, greeting, patch, manager)


async def remove_finalizer(api: Api, greeting: Obj, manager: str) -> None:
    meta = greeting["metadata"]
    finalizers = [f for f in meta.get("finalizers", []) if f != FINALIZER]
    patch = {"metadata": {"finalizers": finalizers or None, "resourceVersion": meta["resourceVersion"]}}
    try:
        await patch_greeting(api, greeting, patch, manager)
    except kr8s.ServerError as error:
        if status_code(error) != 404:  # already gone: someone else finished the job
            raise


async def get_configmap(api: Api, namespace: str, name: str) -> Obj | None:
    try:
        return await request(api, "GET", "v1", f"configmaps/{name}", namespace)
    except kr8s.ServerError as error:
        if status_code(error) == 404:
            return None
        raise


async def create_or_patch_configmap(api: Api, actual: Obj | None, desired: Obj, manager: str) -> str:
    """Create the ConfigMap, or patch it to the desired data and owner. Returns what it did."""
    meta = desired["metadata"]
    if actual is None:
        try:
            await request(api, "POST", "v1", "configmaps", meta["namespace"], desired, field_manager=manager)
            return "created"
        except kr8s.ServerError as error:
            if status_code(error) != 409:  # 409 AlreadyExists: our cache was behind; patch instead
                raise
    patch = {
        "metadata": {"labels": meta["labels"], "ownerReferences": meta["ownerReferences"]},
        "data": desired["data"],
    }
    await request(api, "PATCH", "v1", f"configmaps/{meta['name']}", meta["namespace"], patch, field_manager=manager)
    return "updated"


async def set_index_entry(api: Api, greeting: Obj, message: str | None, manager: str) -> bool:
    """Put (or with message=None, remove) the greeting's entry in the cluster-wide index.
    Returns True when the index changed. A merge patch with null deletes a key."""
    index = await get_configmap(api, INDEX_NAMESPACE, INDEX_NAME)
    data = (index or {}).get("data") or {}
    key = index_key(greeting)
    if data.get(key) == message:
        return False
    if index is None:
        if message is None:
            return False
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": INDEX_NAME, "namespace": INDEX_NAMESPACE},
            "data": {key: message},
        }
        await request(api, "POST", "v1", "configmaps", INDEX_NAMESPACE, body, field_manager=manager)
        return True
    await request(
        api,
        "PATCH",
        "v1",
        f"configmaps/{INDEX_NAME}",
        INDEX_NAMESPACE,
        {"data": {key: message}},
        field_manager=manager,
    )
    return True


def _micro_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


async def record_event(api: Api, greeting: Obj, reason: str, note: str, controller: str, warning: bool = False) -> None:
    """Post an events.k8s.io/v1 Event about the Greeting, as `kubectl describe` and
    `kubectl events` show. Events are best effort: a failure to post one never fails a reconcile."""
    meta = greeting["metadata"]
    body = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"generateName": f"{meta['name']}-", "namespace": meta["namespace"]},
        "eventTime": _micro_now(),
        "reportingController": f"{API_VERSION.split('/')[0]}/{controller}",
        "reportingInstance": f"{controller}-{socket.gethostname()}-{os.getpid()}",
        "action": reason,
        "reason": reason,
        "note": note,
        "type": "Warning" if warning else "Normal",
        "regarding": {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta["uid"],
        },
    }
    try:
        await request(api, "POST", "events.k8s.io/v1", "events", meta["namespace"], body)
    except kr8s.ServerError:
        pass
