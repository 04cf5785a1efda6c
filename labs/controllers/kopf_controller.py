"""The same Greeting controller with kopf: the lab's `greeter-kopf` (lab.start), or under `kopf run`.

Compare with scratch_controller.py: there is no informer, no cache, no work queue and no re-list
here, because kopf does all of that. What is left is the part that is specific to Greetings: render
the message, own a ConfigMap, keep the index entry, and report status. The ConfigMap and the index
writes are the same functions the scratch controller uses (greeter.actions).

It reacts to Greetings only. GREETER_CONFIGMAP_HANDLERS may name a file with one function (a
learner's, saved by lab.save_code) that registers kopf handlers for the ConfigMaps; it is called
once, as this module loads, and those handlers can put a ConfigMap back with memo.repair.
"""

from __future__ import annotations

import argparse
import logging
import os
import warnings
from pathlib import Path
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

from krmcourse.labcode import saved_function

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

    async def repair(namespace: str, name: str, logger: kopf.Logger) -> str:
        return await repair_configmap(memo.api, namespace, name, logger)

    memo.repair = repair  # for handlers that are not in this file (GREETER_CONFIGMAP_HANDLERS)


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL, field="spec")
async def ensure(body: kopf.Body, patch: kopf.Patch, memo: kopf.Memo, logger: kopf.Logger, **_: Any) -> None:
    """Create or repair the owned ConfigMap and the index entry, then report status."""
    greeting = _plain(body)
    message, problem = render(greeting)
    api = memo.api
    if message is not None:
        await _converge_configmap(api, greeting, message, logger)
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


async def repair_configmap(api: kr8s.asyncio.Api, namespace: str, name: str, logger: kopf.Logger) -> str:
    """Put back the ConfigMap that the Greeting namespace/name wants, if it still wants one.
    Returns what it did: "created", "updated", "unchanged", or why it did nothing."""
    greeting = await actions.get_greeting(api, namespace, name)
    if greeting is None or greeting["metadata"].get("deletionTimestamp"):
        return "no Greeting"  # going or gone: garbage collection takes its ConfigMap
    message, _ = render(greeting)
    if message is None:
        return "no message"
    # kopf's logger for a handler carries the object the handler runs for. The log line names it, so
    # that the log shows what noticed the drift: a ConfigMap's own handler, or one of the Greeting's.
    asked = getattr(logger, "extra", {}).get("k8s_ref") or {}
    why = f" (repair asked by a handler of {asked.get('kind')} {asked.get('namespace')}/{asked.get('name')})"
    return await _converge_configmap(api, greeting, message, logger, why)


async def _converge_configmap(api: kr8s.asyncio.Api, greeting: dict[str, Any], message: str,
                              logger: kopf.Logger, why: str = "") -> str:
    desired = desired_configmap(greeting, message)
    actual = await actions.get_configmap(api, greeting["metadata"]["namespace"], configmap_name(greeting))
    if actual is not None and not configmap_differs(actual, desired):
        return "unchanged"
    did = await actions.create_or_patch_configmap(api, actual, desired, MANAGER)
    logger.info(f"{did} ConfigMap {configmap_name(greeting)}{why}")
    return did


def _plain(body: kopf.Body) -> dict[str, Any]:
    """kopf's Body is a read-only mapping view; the shared model functions take plain dicts."""
    return {"metadata": dict(body.metadata), "spec": dict(body.spec), "status": dict(body.status)}


# A learner's ConfigMap handlers: registering them is calling the function, before kopf starts.
if os.environ.get("GREETER_CONFIGMAP_HANDLERS"):
    saved_function(Path(os.environ["GREETER_CONFIGMAP_HANDLERS"]))()


if __name__ == "__main__":
    # As a program (lab.start), for one namespace; `kopf run --namespace ...` does the same.
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--namespace", required=True, help="the namespace whose Greetings it reconciles")
    kopf.configure(verbose=False)
    kopf.run(standalone=True, namespaces=[parser.parse_args().namespace])
