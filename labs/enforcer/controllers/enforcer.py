"""The sidecar enforcer: a validating and mutating admission webhook for Pods.

It acts only on requests. For each new Pod in a namespace that opted in, it reads that namespace's
SidecarPolicy objects and
- on /mutate, adds the policy's sidecar container (a JSONPatch the API server applies), and
- on /validate, refuses the Pod when it lacks a label the policy requires.
It creates nothing and writes nothing to the cluster, which is why it declares ``sideEffects: None``
and can answer dry-run requests too.

Run by the lab (``lab.run_controller``) with KUBECONFIG set to the ``sidecar-enforcer``
ServiceAccount, which may only read SidecarPolicies.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path
from typing import Any

import kr8s.asyncio
from aiohttp import web

from krmcourse.controllerkit import controller_main, log_to_stdout
from krmcourse.webhooks import TLSMaterial, WebhookError, admission_response, parse_review

GROUP_VERSION = "policy.krmcourse.dev/v1"
INJECTED = "policy.krmcourse.dev/injected-by"
log = logging.getLogger("enforcer")


async def sidecar_policies(api: kr8s.asyncio.Api, namespace: str) -> list[dict[str, Any]]:
    """The SidecarPolicies of one namespace, read live for every request.

    A production enforcer answers from an informer cache instead, because admission is on the
    critical path of every write; a live read keeps this lab's code short and always current.
    """
    async with api.call_api(
        "GET", version=GROUP_VERSION, base="/apis", namespace=namespace, url="sidecarpolicies"
    ) as response:
        items: list[dict[str, Any]] = response.json()["items"]
    return sorted(items, key=lambda item: item["metadata"]["name"])


def pod_name(request: dict[str, Any]) -> str:
    meta = request["object"].get("metadata", {})
    return str(meta.get("name") or (meta.get("generateName", "") + "*"))


def sidecar_patch(pod: dict[str, Any], policies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """JSONPatch operations that add each policy's sidecar the Pod does not have yet."""
    present = {c["name"] for c in pod["spec"].get("containers", [])}
    ops: list[dict[str, Any]] = []
    injected: list[str] = []
    for policy in policies:
        sidecar = policy["spec"]["sidecar"]
        name = sidecar.get("name", "log-shipper")
        if name in present:
            continue
        present.add(name)
        injected.append(policy["metadata"]["name"])
        container = {
            "name": name,
            "image": sidecar["image"],
            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
        }
        ops.append({"op": "add", "path": "/spec/containers/-", "value": container})
    if injected:
        if "annotations" not in pod.get("metadata", {}):
            ops.append({"op": "add", "path": "/metadata/annotations", "value": {}})
        key = INJECTED.replace("/", "~1")
        ops.append({"op": "add", "path": f"/metadata/annotations/{key}", "value": ",".join(injected)})
    return ops


def missing_labels(pod: dict[str, Any], policies: list[dict[str, Any]]) -> dict[str, list[str]]:
    """For each policy, the labels it requires that the Pod lacks."""
    labels = pod.get("metadata", {}).get("labels") or {}
    missing: dict[str, list[str]] = {}
    for policy in policies:
        lacking = [key for key in policy["spec"].get("requiredLabels", []) if key not in labels]
        if lacking:
            missing[policy["metadata"]["name"]] = lacking
    return missing


class Enforcer:
    """The two admission endpoints, sharing one API client."""

    def __init__(self, api: kr8s.asyncio.Api) -> None:
        self.api = api

    async def review(self, http_request: web.Request, mutate: bool) -> web.Response:
        try:
            request = parse_review(await http_request.read())
        except WebhookError as exc:
            log.warning("bad request: %s", exc)
            return web.json_response({"error": str(exc)}, status=400)
        namespace = request.get("namespace", "")
        dry = " (dry run)" if request.get("dryRun") else ""
        where = f"{request['operation']} pod {namespace}/{pod_name(request)}{dry}"
        try:
            policies = await sidecar_policies(self.api, namespace)
        except Exception as exc:  # noqa: BLE001 - answer with a clear denial rather than a 500
            log.error("%s: cannot read SidecarPolicies: %s", where, exc)
            message = f"sidecar enforcer cannot read the SidecarPolicies of {namespace}: {exc}"
            return web.json_response(admission_response(request, False, message, code=500))
        pod = request["object"]
        if mutate:
            patch = sidecar_patch(pod, policies) if request["operation"] == "CREATE" else []
            log.info("mutate %s: %s", where, f"{len(patch)} patch operations" if patch else "no change")
            return web.json_response(admission_response(request, True, patch=patch))
        missing = missing_labels(pod, policies)
        if missing:
            reasons = "; ".join(
                f"SidecarPolicy {namespace}/{name} requires label(s) {', '.join(keys)}"
                for name, keys in missing.items()
            )
            log.info("validate %s: denied (%s)", where, reasons)
            return web.json_response(admission_response(request, False, f"pod is missing labels: {reasons}"))
        log.info("validate %s: allowed", where)
        return web.json_response(admission_response(request, True))

    async def mutate(self, http_request: web.Request) -> web.Response:
        return await self.review(http_request, mutate=True)

    async def validate(self, http_request: web.Request) -> web.Response:
        return await self.review(http_request, mutate=False)


async def healthz(_: web.Request) -> web.Response:
    return web.Response(text="ok")


async def serve(host: str, port: int, tls: TLSMaterial) -> None:
    api = await kr8s.asyncio.api()
    enforcer = Enforcer(api)
    app = web.Application()
    app.add_routes(
        [
            web.post("/mutate", enforcer.mutate),
            web.post("/validate", enforcer.validate),
            web.get("/healthz", healthz),
        ]
    )
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=tls.server_context(), reuse_address=True)
    await site.start()
    log.info("serving on https://%s:%d (/mutate, /validate)", host, port)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1", help="the address the API server calls (never 0.0.0.0)")
    parser.add_argument("--tls-dir", type=Path, required=True, help="folder with ca.crt, tls.crt, tls.key")
    args = parser.parse_args(argv)
    tls = TLSMaterial(
        args.tls_dir, args.tls_dir / "ca.crt", args.tls_dir / "tls.crt", args.tls_dir / "tls.key"
    )
    for path in (tls.cert, tls.key):
        if not path.is_file():
            parser.error(f"{path} does not exist; create it with krmcourse.webhooks.make_tls()")
    log_to_stdout()
    controller_main(serve(args.host, args.port, tls))
    return 0


if __name__ == "__main__":
    sys.exit(main())
