"""The same Greeting controller with kopf: run it with `lab.run_kopf(...)`.

Compare with scratch_controller.py: there is no informer, no cache, no work queue and no re-list
here, because kopf does all of that. What is left is the part that is specific to Greetings: render
the message, own a ConfigMap, keep the index entry, and report status. The ConfigMap and the index
writes are the same functions the scratch controller uses (greeter.actions).
"""

from __future__ import annotations

import logging
import warnings
from typing import Any

import kopf
import kr8s.asyncio

# `python -m kopf run` puts its working folder on the import path, and the lab runs it from the lab's
# folder (lab.run_kopf), so the lab's greeter package imports as it does for the scratch controller.
from greeter import actions
from greeter.model import (
    FINALIZER,
    GROUP,
    PLURAL,
    VERSION,
    configmap_differs,
    configmap_name,
    desired_configmap,
    desired_status,
    render,
)

MANAGER = "greeter-kopf"
warnings.filterwarnings("ignore", message="Kubernetes version .* is not supported")


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    # Same finalizer name as the scratch controller, and kopf's bookkeeping in annotations,
    # because the Greeting schema has no room for kopf's own status fields.
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=f"kopf.{GROUP}")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=f"kopf.{GROUP}")
    settings.posting.level = logging.INFO
    settings.execution.default_backoff = 2  # a failed handler runs again in seconds, not kopf's default minute
    settings.posting.loggers = True  # handler logs become Kubernetes Events, as the scratch one posts
    logging.getLogger("httpx").setLevel(logging.WARNING)
    memo.api = await kr8s.asyncio.api()  # one client for all handlers, like kopf's own


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL, field="spec")
async def ensure(body: kopf.Body, patch: kopf.Patch, memo: kopf.Memo, logger: kopf.Logger, **_: Any) -> None:
    """Create or repair the owned ConfigMap and the index entry, then report status."""
    greeting = _plain(body)
    message, problem = render(greeting)
    api = memo.api
    if message is not None:
        desired = desired_configmap(greeting, message)
        actual = await actions.get_configmap(api, greeting["metadata"]["namespace"], configmap_name(greeting))
        if actual is None or configmap_differs(actual, desired):
            did = await actions.create_or_patch_configmap(api, actual, desired, MANAGER)
            logger.info(f"{did} ConfigMap {configmap_name(greeting)}")
        await actions.set_index_entry(api, greeting, message, MANAGER)
    else:
        logger.warning(problem)
    patch.status.update(desired_status(greeting, message, problem))


@kopf.on.delete(GROUP, VERSION, PLURAL)
async def cleanup(body: kopf.Body, memo: kopf.Memo, logger: kopf.Logger, **_: Any) -> None:
    """Remove the index entry; kopf removes the finalizer when this returns."""
    api = memo.api
    await actions.set_index_entry(api, _plain(body), None, MANAGER)
    logger.info("removed the index entry")


def _plain(body: kopf.Body) -> dict[str, Any]:
    """kopf's Body is a read-only mapping view; the shared model functions take plain dicts."""
    return {"metadata": dict(body.metadata), "spec": dict(body.spec), "status": dict(body.status)}
