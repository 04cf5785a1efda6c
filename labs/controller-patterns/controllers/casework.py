"""The casework controller: one loop per pattern that makes or changes something, over the lab's Cases.

Three loops run side by side, each on its own Case and each writing under its own field manager, so that
what one loop does never shows up under another's name:

- **composite** keeps a ConfigMap whose controller ownerReference points at its Case, with the Case's
  spec copied into its data; the garbage collector removes it with the Case;
- **provisioner** keeps a record in a store outside the cluster (a JSON file: the lab's stand-in for a
  cloud), guards it with a finalizer on its Case, and reports the record's id in ``status.externalID``;
  when a Case that carries its finalizer is deleted, it removes the record, then the finalizer;
- **governor** keeps ``spec.size`` of a Case it did not create at the size it was given, whatever anyone
  else writes there.

The fourth pattern needs no loop: the enforcer of the case files is a ValidatingAdmissionPolicy, which
the API server runs itself.

Which Case each loop looks after, and its field manager, come from the case files' record (written by
``patterns_support.open_cases``), read again on every pass: when new case files are opened, the loops
follow without a restart. Every pass compares what is with what should be and writes only the
difference (level-triggered), so a restarted controller simply carries on.

Run by the lab (``lab.run_controller``) with KUBECONFIG set to the ``casework-controller`` ServiceAccount.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import logging
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import kr8s.asyncio

from krmcourse.controllerkit import controller_main, log_to_stdout

GROUP_VERSION = "patterns.krmcourse.dev/v1"
FINALIZER = "patterns.krmcourse.dev/cleanup"
log = logging.getLogger("casework")

Json = dict[str, Any]


async def _call(api: kr8s.asyncio.Api, method: str, url: str, namespace: str, *, core: bool = False,
                manager: str | None = None, body: Json | None = None, merge: bool = False) -> Json | None:
    """One API call; the object it returns, or None for 404. Other errors raise."""
    version, base = ("v1", "/api") if core else (GROUP_VERSION, "/apis")
    kwargs: dict[str, Any] = {}
    if manager:
        kwargs["params"] = {"fieldManager": manager}
    if body is not None:
        kwargs["json"] = body
    if merge:
        kwargs["headers"] = {"Content-Type": "application/merge-patch+json"}
    async with api.call_api(method, version=version, base=base, namespace=namespace, url=url,
                            raise_for_status=False, **kwargs) as response:
        if response.status_code == 404:
            return None
        if response.status_code >= 400:
            raise RuntimeError(f"{method} {url}: {response.status_code} {response.text[:300]}")
        return dict(response.json())


async def composite(api: kr8s.asyncio.Api, namespace: str, part: Json, store: Path) -> None:
    case = await _call(api, "GET", f"cases/{part['case']}", namespace)
    if case is None or case["metadata"].get("deletionTimestamp"):
        return
    data = {"size": str(case["spec"]["size"]), "tier": case["spec"]["tier"]}
    child = await _call(api, "GET", f"configmaps/{part['child']}", namespace, core=True)
    if child is None:
        owner = {"apiVersion": GROUP_VERSION, "kind": "Case", "name": part["case"],
                 "uid": case["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
        body = {"apiVersion": "v1", "kind": "ConfigMap", "data": data,
                "metadata": {"name": part["child"], "namespace": namespace, "ownerReferences": [owner]}}
        await _call(api, "POST", "configmaps", namespace, core=True, manager=part["manager"], body=body)
        log.info("[composite] created ConfigMap %s, controlled by Case %s", part["child"], part["case"])
    elif child.get("data") != data:
        await _call(api, "PATCH", f"configmaps/{part['child']}", namespace, core=True, manager=part["manager"],
                    body={"data": data}, merge=True)
        log.info("[composite] brought ConfigMap %s back in line with Case %s", part["child"], part["case"])


def _read_store(store: Path) -> Json:
    try:
        return dict(json.loads(store.read_text()))
    except (OSError, ValueError):
        return {}


def _write_store(store: Path, records: Json) -> None:
    scratch = store.with_suffix(".new")
    scratch.write_text(json.dumps(records, indent=1))
    scratch.replace(store)


async def provisioner(api: kr8s.asyncio.Api, namespace: str, part: Json, store: Path) -> None:
    cases = (await _call(api, "GET", "cases", namespace) or {}).get("items", [])
    for case in cases:  # any Case with our finalizer that is going away: release what it had, then let it go
        meta = case["metadata"]
        if FINALIZER in (meta.get("finalizers") or []) and meta.get("deletionTimestamp"):
            records = _read_store(store)
            external = (case.get("status") or {}).get("externalID")
            if records.pop(str(external), None) is not None:
                _write_store(store, records)
                log.info("[provisioner] released %s of Case %s", external, meta["name"])
            left = [f for f in meta["finalizers"] if f != FINALIZER]
            await _call(api, "PATCH", f"cases/{meta['name']}", namespace, manager=part["manager"], merge=True,
                        body={"metadata": {"finalizers": left, "resourceVersion": meta["resourceVersion"]}})
    case = next((c for c in cases if c["metadata"]["name"] == part["case"]
                 and not c["metadata"].get("deletionTimestamp")), None)
    if case is None:
        return
    meta, external = case["metadata"], part["externalID"]
    if FINALIZER not in (meta.get("finalizers") or []):  # the finalizer first: nothing outside may leak
        await _call(api, "PATCH", f"cases/{meta['name']}", namespace, manager=part["manager"], merge=True,
                    body={"metadata": {"finalizers": [*(meta.get("finalizers") or []), FINALIZER],
                                       "resourceVersion": meta["resourceVersion"]}})
        return  # the next pass sees the new resourceVersion
    records = _read_store(store)
    if external not in records:
        records[external] = {"case": meta["name"], "namespace": namespace,
                             "created": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
        _write_store(store, records)
        log.info("[provisioner] made %s outside the cluster for Case %s", external, meta["name"])
    if (case.get("status") or {}).get("externalID") != external:
        await _call(api, "PATCH", f"cases/{meta['name']}/status", namespace, manager=part["manager"], merge=True,
                    body={"status": {"externalID": external}})


async def governor(api: kr8s.asyncio.Api, namespace: str, part: Json, store: Path) -> None:
    case = await _call(api, "GET", f"cases/{part['case']}", namespace)
    if case is None or case["metadata"].get("deletionTimestamp"):
        return
    if case["spec"].get("size") != part["size"]:
        await _call(api, "PATCH", f"cases/{part['case']}", namespace, manager=part["manager"], merge=True,
                    body={"spec": {"size": part["size"]}})
        log.info("[governor] set the size of Case %s from %s to %s", part["case"], case["spec"].get("size"),
                 part["size"])


Loop = Callable[[kr8s.asyncio.Api, str, Json, Path], Awaitable[None]]


async def loop(name: str, reconcile: Loop, api: kr8s.asyncio.Api, namespace: str, record: Path, store: Path,
               period: float) -> None:
    """One pattern's loop: read the record afresh, reconcile, wait, for ever."""
    while True:
        try:
            part = json.loads(record.read_text()).get(name)
        except (OSError, ValueError):
            part = None  # no case files open yet
        if part:
            try:
                await reconcile(api, namespace, part, store)
            except Exception as exc:  # noqa: BLE001 - a loop keeps going through API hiccups
                log.error("[%s] pass failed: %s", name, exc)
        await asyncio.sleep(period)


async def run(namespace: str, record: Path, store: Path, period: float) -> None:
    api = await kr8s.asyncio.api()
    log.info("casework controller started in namespace %s: loops composite, provisioner, governor", namespace)
    await asyncio.gather(*(loop(name, fn, api, namespace, record, store, period)
                           for name, fn in (("composite", composite), ("provisioner", provisioner),
                                            ("governor", governor))))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--record", type=Path, required=True, help="the case files' record (JSON)")
    parser.add_argument("--store", type=Path, required=True, help="the provisioner's outside store (JSON)")
    parser.add_argument("--period", type=float, default=1.0, help="seconds between passes")
    args = parser.parse_args(argv)
    log_to_stdout()
    controller_main(run(args.namespace, args.record, args.store, args.period))
    return 0


if __name__ == "__main__":
    sys.exit(main())
