"""Run the reconcile for one Greeting right now, outside any controller process.

The exercises' solutions use it: it is the same code the controller runs, applied once. It works
from a notebook too, where an event loop is already running, by using a private loop in a thread.
"""

from __future__ import annotations

import asyncio
import logging
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import kr8s.asyncio

from . import actions
from .reconcile import reconcile

MANAGER = "greeter-once"


async def _reconcile_once(kubeconfig: Path, namespace: str, name: str) -> str:
    with warnings.catch_warnings():  # kr8s warns about Kubernetes newer than it was tested with
        warnings.filterwarnings("ignore", message="Kubernetes version .* is not supported")
        api = await kr8s.asyncio.api(kubeconfig=str(kubeconfig))
    greeting = await actions.get_greeting(api, namespace, name)
    if greeting is None:
        return "absent"

    async def get_configmap(ns: str, cm: str) -> dict | None:
        return await actions.get_configmap(api, ns, cm)

    return await reconcile(api, greeting, get_configmap, MANAGER, logging.getLogger("greeter.once"))


def reconcile_now(kubeconfig: Path, namespace: str, name: str) -> str:
    """Reconcile one Greeting against the cluster of `kubeconfig`; returns the last outcome."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, _reconcile_once(kubeconfig, namespace, name)).result()
