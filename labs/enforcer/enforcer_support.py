"""Plumbing for the enforcer lab: start the webhook, register it, and probe admission.

The notebook and the exercise checks call these so that their cells show the idea (what the API
server answers) rather than certificate and port handling. Every probe is a real request to the
lab's API server, usually with ``--dry-run=server`` so that it passes through admission (mutating
webhooks, validating webhooks and policies) without storing anything.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

import yaml

from krmcourse import Lab, ManagedProcess
from krmcourse.errors import KubectlError
from krmcourse.webhooks import Endpoint, endpoint_for, port_open

NAMESPACE = "enforcer-system"
SERVICE_ACCOUNT = "sidecar-enforcer"
WEBHOOK = "sidecar-enforcer"
OPT_IN_LABEL = "policy.krmcourse.dev/sidecars"


@dataclass
class Enforcer:
    """A running enforcer webhook: its process, and where it listens with which certificate."""

    process: ManagedProcess
    endpoint: Endpoint

    @property
    def url(self) -> str:
        return self.endpoint.url()

    @property
    def port(self) -> int:
        return self.endpoint.port

    def stop(self) -> None:
        self.process.stop()


@dataclass
class Admission:
    """What the API server answered to a create request."""

    allowed: bool
    message: str = ""
    object: dict[str, Any] = field(default_factory=dict)

    @property
    def containers(self) -> list[str]:
        """Name=image of each container of the admitted object (after mutation)."""
        spec = self.object.get("spec", {})
        return [f"{c['name']}={c['image']}" for c in spec.get("containers", [])]


def webhook_configurations(url: str, ca_bundle: str, failure_policy: str = "Fail") -> list[dict[str, Any]]:
    """The Mutating and Validating webhook configurations that point the API server at ``url``.

    Both match Pod creation in namespaces labelled ``policy.krmcourse.dev/sidecars=enabled`` only, so
    the control plane's own namespaces never depend on this webhook being up.
    """
    if failure_policy not in ("Fail", "Ignore"):
        raise ValueError(f"failurePolicy must be Fail or Ignore, not {failure_policy!r}")

    def webhook(kind: str, path: str) -> dict[str, Any]:
        return {
            "name": f"{kind}.sidecars.policy.krmcourse.dev",
            "clientConfig": {"url": f"{url}/{path}", "caBundle": ca_bundle},
            "rules": [
                {
                    "apiGroups": [""],
                    "apiVersions": ["v1"],
                    "operations": ["CREATE"],
                    "resources": ["pods"],
                    "scope": "Namespaced",
                }
            ],
            "namespaceSelector": {"matchLabels": {OPT_IN_LABEL: "enabled"}},
            "failurePolicy": failure_policy,
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": 5,
        }

    api = "admissionregistration.k8s.io/v1"
    return [
        {
            "apiVersion": api,
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": WEBHOOK},
            "webhooks": [{**webhook("inject", "mutate"), "reinvocationPolicy": "Never"}],
        },
        {
            "apiVersion": api,
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": WEBHOOK},
            "webhooks": [webhook("labels", "validate")],
        },
    ]


def start(lab: Lab, failure_policy: str = "Fail") -> Enforcer:
    """Make certificates, start the webhook as the sidecar-enforcer ServiceAccount, and register it.

    It listens where the lab's API server can call it: 127.0.0.1 when the API server runs on this
    machine, the container network's gateway when it runs in a kind node.
    """
    endpoint = endpoint_for(lab, lab.home / "enforcer-tls")
    process = lab.start("enforcer", *serving_args(endpoint))
    enforcer = Enforcer(process, endpoint)
    lab.apply(webhook_configurations(enforcer.url, endpoint.tls.ca_bundle, failure_policy))
    return enforcer


def serving_args(endpoint: Endpoint) -> list[str]:
    """The enforcer's arguments that make it serve at ``endpoint``, with its certificate."""
    return ["--host", endpoint.host, "--port", str(endpoint.port), "--tls-dir", str(endpoint.tls.directory)]


def register_for_faults(lab: Lab) -> list[str]:
    """For the fault harness (``converges.prepare`` in lab.yaml), which starts the enforcer itself: make
    certificates for a free port, register the webhook there (failurePolicy Fail), and return the
    arguments that make the declared enforcer serve there. Nothing serves there until it starts."""
    endpoint = endpoint_for(lab, lab.home / "enforcer-tls")
    lab.apply(webhook_configurations(endpoint.url(), endpoint.tls.ca_bundle))
    return serving_args(endpoint)


def set_failure_policy(lab: Lab, policy: str) -> str:
    """Switch both webhooks to failurePolicy ``policy`` (Fail or Ignore); returns what is stored."""
    if policy not in ("Fail", "Ignore"):
        raise ValueError(f"failurePolicy must be Fail or Ignore, not {policy!r}")
    patch = json.dumps([{"op": "replace", "path": "/webhooks/0/failurePolicy", "value": policy}])
    for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
        lab.kubectl("patch", kind, WEBHOOK, "--type=json", "-p", patch)
    stored = lab.get("validatingwebhookconfiguration", WEBHOOK) or {}
    return str(stored["webhooks"][0]["failurePolicy"])


def registered_address(lab: Lab) -> tuple[str, int] | None:
    """The host and port the registered webhook configuration points at, or None when none is."""
    config = lab.get("mutatingwebhookconfiguration", WEBHOOK)
    if not config:
        return None
    url = urlparse(config["webhooks"][0]["clientConfig"]["url"])
    return (url.hostname or "", url.port or 443)


def answering(lab: Lab) -> bool:
    """True when the webhook is registered and something listens where it points."""
    address = registered_address(lab)
    return address is not None and port_open(address[1], host=address[0])


def ensure_running(lab: Lab) -> None:
    """Start and register the enforcer unless a registered one already answers (used by solve())."""
    if not answering(lab):
        start(lab)


def pod(name: str, namespace: str, image: str = "registry.example/shop/web:1.4", **labels: str) -> dict:
    """A minimal Pod manifest for probing admission."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"containers": [{"name": "app", "image": image}]},
    }


def deployment(
    name: str, namespace: str, replicas: int, image: str = "registry.example/shop/web:1.4"
) -> dict:
    """A minimal Deployment manifest for probing admission."""
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": {**labels, "team": "web"}},
                "spec": {"containers": [{"name": "app", "image": image}]},
            },
        },
    }


def create(lab: Lab, manifest: dict[str, Any], dry_run: bool = True) -> Admission:
    """Send a real create request; with ``dry_run`` it goes through admission and is not stored."""
    args = ["create", "-f", "-", "-o", "json"]
    if dry_run:
        args.append("--dry-run=server")
    try:
        out = lab.kubectl(*args, input=yaml.safe_dump(manifest))
    except KubectlError as exc:
        return Admission(False, exc.stderr.strip())
    return Admission(True, "", json.loads(out))


def wait_refused(lab: Lab, manifest: dict[str, Any], timeout: float = 30) -> Admission:
    """Dry-run ``manifest`` until the API server refuses it (new policies take a moment to load)."""

    def attempt() -> Admission | None:
        result = create(lab, manifest)
        return None if result.allowed else result

    return lab.wait_until(attempt, timeout=timeout, message=f"{manifest['kind']} was never refused")


def wait_allowed(lab: Lab, manifest: dict[str, Any], timeout: float = 30) -> Admission:
    """Dry-run ``manifest`` until the API server admits it."""

    def attempt() -> Admission | None:
        result = create(lab, manifest)
        return result if result.allowed else None

    return lab.wait_until(attempt, timeout=timeout, message=f"{manifest['kind']} was never admitted")


def containers_by_pod(lab: Lab, namespace: str, selector: str) -> dict[str, list[str]]:
    """Container names of each stored pod matching a label selector."""
    pods = lab.objects("pods", namespace, selector=selector)
    return {p["metadata"]["name"]: [c["name"] for c in p["spec"]["containers"]] for p in pods}


def wait_for_pods(
    lab: Lab, namespace: str, selector: str, count: int, timeout: float = 60
) -> dict[str, list[str]]:
    """Wait until ``count`` pods match ``selector``; returns their container names by pod."""

    def ready() -> dict[str, list[str]] | None:
        pods = containers_by_pod(lab, namespace, selector)
        return pods if len(pods) == count else None

    return lab.wait_until(ready, timeout=timeout, message=f"{count} pods matching {selector} did not appear")
