"""Serve FancyDNS v2 beside v1 through a conversion webhook, and migrate what etcd stores.

The steps are the ones a real operator release goes through:

1. start the conversion webhook (TLS where the API server can reach it, with a CA it is told to trust);
2. add v2 to the CRD, make it the storage version, and point `spec.conversion` at the webhook;
3. rewrite every object, so etcd holds it encoded as v2;
4. only then remove v1 from `status.storedVersions`.
"""

from __future__ import annotations

import base64
import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from krmcourse import Lab, ManagedProcess
from krmcourse.webhooks import endpoint_for, port_open

GROUP = "dns.krmcourse.dev"
CRD_NAME = f"fancydnses.{GROUP}"
NAMESPACE = "dns"
WEBHOOK_SCRIPT = Path(__file__).parent / "controllers" / "fancydns_conversion_webhook.py"

PROTOCOL_SCHEMA = {
    "type": "string",
    "enum": ["UDP", "TCP", "All"],
    "default": "All",
    "description": "Which protocols to answer queries on. All leaves room for a protocol added later.",
}


@dataclass
class Webhook:
    """A running conversion webhook and what the API server needs to reach it."""

    process: ManagedProcess
    url: str
    ca_pem: bytes


_running: dict[str, Webhook] = {}


def start_webhook(lab: Lab) -> Webhook:
    """Start the webhook as a process the lab stops on down()."""
    # The lab's own state folder: down() removes it, so no key outlives the cluster. The webhook listens
    # where the lab's API server can call it, with a certificate for that address.
    endpoint = endpoint_for(lab, lab.home / "conversion-webhook")
    process = lab.run_controller(
        WEBHOOK_SCRIPT, "--host", endpoint.host, "--port", str(endpoint.port), "--cert", str(endpoint.tls.cert),
        "--key", str(endpoint.tls.key), name="conversion-webhook"
    )
    process.wait_for_log("serving conversions", timeout=30)
    webhook = Webhook(process, endpoint.url("/convert"), endpoint.tls.ca_cert.read_bytes())
    _running[lab.name] = webhook
    return webhook


def _v2_version(v1: dict[str, Any]) -> dict[str, Any]:
    """v2 is v1 with the two booleans replaced by one enum; the CEL rule about them goes too."""
    v2 = copy.deepcopy(v1)
    v2["name"], v2["served"], v2["storage"] = "v2", True, True
    spec = v2["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec["properties"].pop("enableTCP", None)
    spec["properties"].pop("enableUDP", None)
    spec["properties"]["protocol"] = PROTOCOL_SCHEMA
    spec.pop("x-kubernetes-validations", None)
    v2["additionalPrinterColumns"] = [
        {"name": "Zone", "type": "string", "jsonPath": ".spec.zone"},
        {"name": "Protocol", "type": "string", "jsonPath": ".spec.protocol"},
    ]
    return v2


def install_v2(lab: Lab, webhook: Webhook) -> dict[str, Any]:
    """Serve v2 as the storage version, converting through the webhook. Returns the CRD as stored."""
    crd = lab.get("customresourcedefinition", CRD_NAME)
    if crd is None:
        raise LookupError("The FancyDNS CRD is missing; bring the lab up first.")
    crd.pop("status", None)
    for field in ("managedFields", "creationTimestamp", "generation", "uid"):
        crd["metadata"].pop(field, None)
    versions = [v for v in crd["spec"]["versions"] if v["name"] != "v2"]
    v1 = next(v for v in versions if v["name"] == "v1")
    v1["storage"] = False
    crd["spec"]["versions"] = [v1, _v2_version(v1)]
    crd["spec"]["conversion"] = {
        "strategy": "Webhook",
        "webhook": {
            "conversionReviewVersions": ["v1"],
            "clientConfig": {"url": webhook.url, "caBundle": base64.b64encode(webhook.ca_pem).decode()},
        },
    }
    lab.kubectl("replace", "-f", "-", input=json.dumps(crd))
    lab.wait_until(lambda: _serves_v2(lab), timeout=30, message="the API server does not serve FancyDNS v2")
    stored = lab.get("customresourcedefinition", CRD_NAME)
    assert stored is not None
    return stored


def _serves_v2(lab: Lab) -> bool:
    try:
        read_as(lab, "v2")
    except Exception:  # noqa: BLE001 - discovery and the webhook take a moment to settle
        return False
    return True


def _webhook_answers(url: str) -> bool:
    parsed = urlparse(url)
    return port_open(parsed.port or 443, host=parsed.hostname or "127.0.0.1", timeout=1)


def ensure_v2(lab: Lab) -> None:
    """Make sure v2 is served through a webhook that is up; start one and re-point the CRD if not."""
    crd = lab.get("customresourcedefinition", CRD_NAME) or {}
    url = crd.get("spec", {}).get("conversion", {}).get("webhook", {}).get("clientConfig", {}).get("url")
    has_v2 = any(v["name"] == "v2" for v in crd.get("spec", {}).get("versions", []))
    webhook = _running.get(lab.name)
    if has_v2 and url and webhook and webhook.url == url and webhook.process.alive and _webhook_answers(url):
        return
    install_v2(lab, start_webhook(lab))


def stored_versions(lab: Lab) -> list[str]:
    """status.storedVersions: every version etcd may still hold objects in."""
    crd = lab.get("customresourcedefinition", CRD_NAME) or {}
    return list(crd.get("status", {}).get("storedVersions", []))


def stored_as(lab: Lab) -> dict[str, str] | None:
    """The version etcd holds each FancyDNS in, read from etcd itself (no API server in between, so no
    conversion), by name; None when the lab's provider cannot reach etcd.

    Custom resources are stored as JSON, so the stored apiVersion is plain to read.
    """
    if not lab.can("etcd"):
        return None
    found = {}
    for obj in read_as(lab, "v2"):
        name = obj["metadata"]["name"]
        kvs = lab.provider.etcd_range(lab.cluster, f"/registry/{GROUP}/fancydnses/{NAMESPACE}/{name}")
        try:
            found[name] = json.loads(base64.b64decode(kvs[0]["value"]))["apiVersion"].split("/")[-1]
        except (IndexError, KeyError, ValueError):  # gone meanwhile, or not JSON
            found[name] = "unreadable"
    return found


def read_as(lab: Lab, version: str) -> list[dict[str, Any]]:
    """Every FancyDNS, as the API server hands it out in the given version."""
    return lab.objects(f"fancydnses.{version}.{GROUP}", NAMESPACE)


def migrate(lab: Lab) -> list[dict[str, str]]:
    """Rewrite every object in the storage version, then drop other versions from storedVersions.

    An update re-encodes the object in the current storage version even when nothing in it changed;
    the new resourceVersion is the evidence that etcd holds a fresh copy.
    """
    rows = []
    for obj in read_as(lab, "v2"):
        before = obj["metadata"]["resourceVersion"]
        written = json.loads(lab.kubectl("replace", "-o", "json", "-f", "-", input=json.dumps(obj)))
        rows.append(
            {
                "name": obj["metadata"]["name"],
                "resourceVersion before": before,
                "resourceVersion after": written["metadata"]["resourceVersion"],
            }
        )
    lab.kubectl(
        "patch",
        "customresourcedefinition",
        CRD_NAME,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": {"storedVersions": ["v2"]}}),
    )
    return rows
