"""The FancyDNS operator, reduced to what the lab needs: it reports, per object, what it would do.

Its own configuration carries a feature gate (`--feature-gates QueryLogging=true`). The gate belongs
to the operator, not to the API: the field `spec.queryLogging` is always in the schema, documented and
validated, and the operator says in the `QueryLogging` condition whether it honoured it. Nothing runs
DNS here; the lab has no container runtime, so the `Ready` condition only states what would be served.

Run: python fancydns_operator.py --namespace dns [--feature-gates QueryLogging=true]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import sys
from typing import Any

import kr8s.asyncio

from krmcourse.controllerkit import Client, Informer, Resource, WorkQueue, controller_main, key_of, run_loop

VERSION = "dns.krmcourse.dev/v1"
PLURAL = "fancydnses"
FANCYDNSES = Resource("dns.krmcourse.dev", "v1", PLURAL)
KNOWN_GATES = {"QueryLogging": False}


def parse_gates(text: str) -> dict[str, bool]:
    """`A=true,B=false` -> {"A": True, "B": False}; unknown gates are an error, like kube's own flags."""
    gates = dict(KNOWN_GATES)
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, value = item.partition("=")
        if name not in KNOWN_GATES or value.lower() not in ("true", "false"):
            raise SystemExit(f"bad --feature-gates entry {item!r}; known gates: {', '.join(KNOWN_GATES)}")
        gates[name] = value.lower() == "true"
    return gates


def desired_conditions(obj: dict[str, Any], gates: dict[str, bool]) -> list[dict[str, Any]]:
    """What the status should say about this object under these gates."""
    spec = obj.get("spec", {})
    generation = obj["metadata"].get("generation", 0)
    protocols = [
        p for p, on in (("TCP", spec.get("enableTCP", True)), ("UDP", spec.get("enableUDP", True))) if on
    ]
    ready = {
        "type": "Ready",
        "status": "True",
        "reason": "Configured",
        "message": f"would serve {spec.get('zone')} over {'+'.join(protocols) or 'nothing'}",
    }
    wanted = spec.get("queryLogging", "Disabled") == "Enabled"
    if not wanted:
        logging = {
            "type": "QueryLogging",
            "status": "False",
            "reason": "Disabled",
            "message": "not requested",
        }
    elif gates["QueryLogging"]:
        logging = {
            "type": "QueryLogging",
            "status": "True",
            "reason": "Enabled",
            "message": "queries are logged",
        }
    else:
        logging = {
            "type": "QueryLogging",
            "status": "False",
            "reason": "FeatureGateDisabled",
            "message": "this operator runs with QueryLogging=false; ask the platform team to enable it",
        }
    for cond in (ready, logging):
        cond["observedGeneration"] = generation
    return [ready, logging]


def merge_times(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Keep lastTransitionTime when a condition's status did not change."""
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    previous = {c["type"]: c for c in old}
    for cond in new:
        before = previous.get(cond["type"])
        same = before and before.get("status") == cond["status"] and before.get("lastTransitionTime")
        cond["lastTransitionTime"] = before["lastTransitionTime"] if same else now
    return new


async def reconcile(
    api: kr8s.asyncio.Api, namespace: str, obj: dict[str, Any], gates: dict[str, bool]
) -> None:
    """Write status only when it would change: no write, no event, no load."""
    status = obj.get("status", {})
    conditions = merge_times(status.get("conditions", []), desired_conditions(obj, gates))
    wanted = {"observedGeneration": obj["metadata"].get("generation", 0), "conditions": conditions}
    if wanted == {k: status.get(k) for k in wanted}:
        return
    name = obj["metadata"]["name"]
    async with api.call_api(
        "PATCH",
        version=VERSION,
        namespace=namespace,
        url=f"{PLURAL}/{name}/status",
        content=json.dumps({"status": wanted}),
        headers={"Content-Type": "application/merge-patch+json"},
        raise_for_status=False,
    ) as response:
        print(
            f"status {namespace}/{name}: HTTP {response.status_code} "
            + " ".join(f"{c['type']}={c['status']}/{c['reason']}" for c in conditions),
            flush=True,
        )


async def run(namespace: str, gates: dict[str, bool]) -> None:
    """Keep a watch-fed cache of FancyDNS objects and reconcile each one that changes.

    Any failure (the API server restarting, a conversion webhook that is down) is logged and retried:
    the cache lists again after a pause, and a failed reconcile comes back with a backoff. A
    controller that crashes on the first error converges on nothing.
    """
    api = await kr8s.asyncio.api(kubeconfig=os.environ.get("KUBECONFIG"))
    print(f"fancydns operator: namespace {namespace}, gates {gates}", flush=True)
    cache = Informer(Client(api), FANCYDNSES, namespace)
    queue = WorkQueue()
    cache.handlers.append(lambda _kind, _old, new: queue.add(key_of(new)) if new is not None else None)

    async def reconcile_key(key: str) -> None:
        if (obj := cache.store.get(key)) is not None:
            await reconcile(api, namespace, obj, gates)

    watching = asyncio.create_task(cache.run())
    await cache.synced.wait()
    print(f"synced {len(cache.store)} object(s)", flush=True)
    await asyncio.gather(watching, run_loop("fancydns", queue, reconcile_key))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--namespace", default="dns")
    parser.add_argument("--feature-gates", default="", help="e.g. QueryLogging=true")
    args = parser.parse_args(argv)
    controller_main(run(args.namespace, parse_gates(args.feature_gates)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
