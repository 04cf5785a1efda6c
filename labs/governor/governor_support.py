"""Plumbing for the governor lab: run the governor, play the deployer, read managedFields.

The notebook calls these so that its cells show what the cluster says (who owns ``spec.replicas``,
what the HorizontalPodAutoscaler reports) rather than kubectl arguments and JSON walking.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from krmcourse import Lab, ManagedProcess
from krmcourse.errors import KrmcourseError, KubectlError

NAMESPACE = "shop"
SERVICE_ACCOUNT = "queue-governor"
DEPLOYER = "deployer"


def start(lab: Lab, period: float = 1.0) -> ManagedProcess:
    """Run the governor as the queue-governor ServiceAccount; returns once it is working."""
    return lab.start("governor", "--namespace", NAMESPACE, "--period", str(period))


def set_queue(lab: Lab, queue: str, length: int | str) -> None:
    """Change the signal: the queue ConfigMap's data.length."""
    patch = json.dumps({"data": {"length": str(length)}})
    lab.kubectl("patch", "configmap", queue, "-n", NAMESPACE, "--type=merge", "-p", patch)


def replicas(lab: Lab, deployment: str) -> int | None:
    """spec.replicas of a Deployment in shop, or None when it does not exist."""
    obj = lab.get("deployment", deployment, namespace=NAMESPACE)
    return None if obj is None else int(obj["spec"].get("replicas", 1))


@dataclass
class ApplyResult:
    ok: bool
    output: str


def deployer_config(lab: Lab) -> str:
    """The deployer's current config for the worker (worker.yaml in the ConfigMap deployer-config)."""
    config = lab.get("configmap", "deployer-config", namespace=NAMESPACE)
    if config is None or "worker.yaml" not in (config.get("data") or {}):
        raise KrmcourseError(
            "The ConfigMap shop/deployer-config with a worker.yaml key is missing.",
            hint="Restore it with lab.reset(), or re-apply labs/governor/manifests/25-deployer-config.yaml.",
        )
    return str(config["data"]["worker.yaml"])


def deploy(lab: Lab, force: bool = False, dry_run: bool = False) -> ApplyResult:
    """Apply the deployer's config with server-side apply, as field manager ``deployer``.

    Without ``force``, the API server refuses to change a field another manager owns and says who:
    that 409 Conflict is server-side apply making a fight visible instead of silently overwriting.
    """
    args = ["apply", "--server-side", f"--field-manager={DEPLOYER}", "-f", "-"]
    if force:
        args.append("--force-conflicts")
    if dry_run:
        args += ["--dry-run=server", "-o", "json", "--show-managed-fields"]
    try:
        return ApplyResult(True, lab.kubectl(*args, input=deployer_config(lab)).strip())
    except KubectlError as exc:
        return ApplyResult(False, exc.stderr.strip())


def owns(fields: dict[str, Any], path: tuple[str, ...]) -> bool:
    """True when a managedFields ``fieldsV1`` tree includes the field at ``path``."""
    node: Any = fields
    for part in path:
        if not isinstance(node, dict) or f"f:{part}" not in node:
            return False
        node = node[f"f:{part}"]
    return True


def with_managed_fields(lab: Lab, kind: str, name: str) -> dict[str, Any]:
    """The object including metadata.managedFields, which kubectl hides unless asked."""
    found = lab.get(kind, name, NAMESPACE, show_managed_fields=True)
    assert found is not None, f"{kind} {NAMESPACE}/{name} is not there"
    return found


def managers(lab: Lab, deployment: str) -> list[dict[str, Any]]:
    """One row per field manager of a Deployment: how it wrote, and whether it owns replicas/template."""
    obj = with_managed_fields(lab, "deployment", deployment)
    rows = []
    for entry in obj.get("metadata", {}).get("managedFields", []):
        fields = entry.get("fieldsV1", {})
        rows.append(
            {
                "manager": entry["manager"],
                "operation": entry["operation"],
                "subresource": entry.get("subresource", ""),
                "owns replicas": owns(fields, ("spec", "replicas")),
                "owns template": owns(fields, ("spec", "template")),
            }
        )
    return rows


def replicas_owners(lab: Lab, deployment: str) -> list[str]:
    """The field managers that own spec.replicas of a Deployment right now."""
    return [row["manager"] for row in managers(lab, deployment) if row["owns replicas"]]


def hpa_condition(lab: Lab, name: str, condition: str) -> dict[str, Any] | None:
    """One condition of a HorizontalPodAutoscaler's status, as kube-controller-manager wrote it."""
    hpa = lab.get("horizontalpodautoscaler.autoscaling", name, namespace=NAMESPACE) or {}
    for cond in hpa.get("status", {}).get("conditions", []):
        if cond["type"] == condition:
            return dict(cond)
    return None


def metrics_api_served(lab: Lab) -> bool:
    """True when the cluster serves the resource metrics API (metrics.k8s.io) that HPAs read."""
    try:
        lab.kubectl("get", "--raw", "/apis/metrics.k8s.io/v1beta1")
    except KubectlError:
        return False
    return True


def can_i(lab: Lab, verb: str, resource: str, subresource: str = "") -> bool:
    """Ask the API server's authorizer whether the governor's ServiceAccount may do something."""
    return lab.can_i(f"{NAMESPACE}/{SERVICE_ACCOUNT}", verb, resource, NAMESPACE, subresource)
