"""Plumbing for the composite lab: run the WebApp controller (and, for buckets, the provisioner).

The provisioner and its pretend cloud come from the provisioner lab, unchanged: this lab's manifests
carry a copy of the Bucket CRD and the provisioner's RBAC, and ``tests/test_composite.py`` checks that
the copies match.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from krmcourse import Lab, ManagedProcess
from krmcourse.labcode import lab_module

NAMESPACE = "krm-system"
SERVICE_ACCOUNT = "webapp-controller"
TEAM = "web"
KINDS = ("configmap", "deployment", "service", "bucket")
STARTING_OBJECTS = Path(__file__).resolve().parent / "manifests" / "50-starting-objects.yaml"


def provisioner_lab() -> ModuleType:
    """The provisioner lab's support module: the cloud and the provisioner, reused as they are."""
    return lab_module("provisioner", "provisioner_support")


def start_cloud(lab: Lab) -> Any:
    """The provisioner lab's pretend cloud beside this cluster, configured for the provisioner: what the fault
    harness starts before the provisioner (``converges.prepare`` in lab.yaml). Returns its CloudClient."""
    return provisioner_lab().start_cloud(lab)


def start_controller(lab: Lab) -> ManagedProcess:
    """Run the WebApp controller as its own ServiceAccount, once per cluster."""
    return lab.start("webapp-controller")


def webapp(lab: Lab, name: str, namespace: str = TEAM) -> dict[str, Any] | None:
    return lab.get("webapp", name, namespace=namespace)


def ready(obj: dict[str, Any] | None) -> dict[str, Any]:
    conditions = ((obj or {}).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == "Ready"), {})


def wait_ready(lab: Lab, name: str, namespace: str = TEAM, timeout: float = 60) -> dict[str, Any]:
    """Wait until the WebApp reports Ready=True for its current generation."""

    def done() -> dict[str, Any] | None:
        obj = webapp(lab, name, namespace)
        cond = ready(obj)
        if (
            obj
            and cond.get("status") == "True"
            and cond.get("observedGeneration") == obj["metadata"]["generation"]
        ):
            return obj
        return None

    return lab.wait_until(done, timeout=timeout, message=f"WebApp {namespace}/{name} never became Ready")


def wait_reason(lab: Lab, name: str, reason: str, namespace: str = TEAM, timeout: float = 30) -> dict:
    return lab.wait_until(
        lambda: ready(webapp(lab, name, namespace)).get("reason") == reason and webapp(lab, name, namespace),
        timeout=timeout,
        message=f"WebApp {namespace}/{name} never reported reason {reason}",
    )


def controller_of(obj: dict[str, Any] | None) -> dict[str, Any] | None:
    """The ownerReference with controller: true, if any."""
    refs = ((obj or {}).get("metadata") or {}).get("ownerReferences") or []
    return next((r for r in refs if r.get("controller")), None)


def children(lab: Lab, name: str, namespace: str = TEAM) -> list[dict[str, Any]]:
    """Objects of the composed kinds whose controller is the WebApp ``name``, as the API server has them."""
    out = []
    for kind in KINDS:
        items = lab.api.get(kind, namespace=namespace)
        for item in items:
            ref = controller_of(item.raw)
            if ref and ref["kind"] == "WebApp" and ref["name"] == name:
                out.append(item.raw)
    return out


def summary(objs: list[dict[str, Any]]) -> list[str]:
    """Kind/name → owner, one line each, for showing ownership in a cell."""
    lines = []
    for obj in objs:
        ref = controller_of(obj)
        owner = f"{ref['kind']}/{ref['name']}" if ref else "(no controller)"
        lines.append(f"{obj['kind']}/{obj['metadata']['name']:<24} controlled by {owner}")
    return lines


def pods_of(lab: Lab, name: str, namespace: str = TEAM) -> list[dict[str, Any]]:
    selector = f"app.kubernetes.io/name=webapp,app.kubernetes.io/instance={name}"
    return [p.raw for p in lab.api.get("pods", namespace=namespace, label_selector=selector)]


def starting_objects(*names: str) -> list[dict[str, Any]]:
    """The objects of that name in the lab's starting manifest, in its order: to put them back as the lab made them."""
    docs = [d for d in yaml.safe_load_all(STARTING_OBJECTS.read_text()) if d]
    return [d for d in docs if d["metadata"]["name"] in names]


# --------------------------------------------------------------------------- orphan-children, drawn per cluster
HANDOVER = "legacy-handover"  # a ConfigMap in krm-system: how many objects the other team made (once it has)
OTHER_TEAM = {"team": "reporting"}
_ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"  # no 0/o, 1/l/i: names are read off a screen


def legacy_users(lab: Lab) -> dict[str, list[str]]:
    """Which of legacy's children the other team's objects use, read from those objects as they are now:
    child ("service", "configmap") -> the "Kind/name" of each object that refers to it."""
    selector = ",".join(f"{k}={v}" for k, v in OTHER_TEAM.items())
    users: dict[str, list[str]] = {}
    for obj in lab.objects("ingresses.networking.k8s.io,deployments", TEAM, selector=selector):
        where = f"{obj['kind']}/{obj['metadata']['name']}"
        if obj["kind"] == "Ingress":
            for rule in obj["spec"].get("rules", []):
                for path in (rule.get("http") or {}).get("paths", []):
                    if path["backend"].get("service", {}).get("name") == "legacy":
                        users.setdefault("service", []).append(where)
        else:
            for volume in obj["spec"]["template"]["spec"].get("volumes", []):
                if (volume.get("configMap") or {}).get("name") == "legacy-config":
                    users.setdefault("configmap", []).append(where)
    return users


def handed_over(lab: Lab) -> int:
    """How many objects the other team made (0 before :func:`hand_over_legacy` has run)."""
    cm = lab.get("configmap", HANDOVER, namespace=NAMESPACE)
    return int(((cm or {}).get("data") or {}).get("objects", "0"))


def other_team_objects(lab: Lab) -> int:
    selector = ",".join(f"{k}={v}" for k, v in OTHER_TEAM.items())
    return len(lab.objects("ingresses.networking.k8s.io,deployments", TEAM, selector=selector))


def hand_over_legacy(lab: Lab) -> None:
    """Once per cluster: another team starts using some of legacy's children, drawn here (its Service, through
    an Ingress; its ConfigMap, mounted by a Deployment of its own; or both), under names drawn too. legacy's
    Deployment is never taken up."""
    import secrets

    if handed_over(lab):
        return
    rng = secrets.SystemRandom()
    token = "".join(rng.choice(_ALPHABET) for _ in range(4))
    taken = rng.choice([["service"], ["configmap"], ["service", "configmap"]])
    objects: list[dict[str, Any]] = []
    if "service" in taken:
        name = f"reports-{token}"
        objects.append({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
                        "metadata": {"name": name, "namespace": TEAM, "labels": OTHER_TEAM},
                        "spec": {"rules": [{"host": f"{name}.example.com", "http": {"paths": [{
                            "path": "/", "pathType": "Prefix",
                            "backend": {"service": {"name": "legacy", "port": {"number": 80}}}}]}}]}})
    if "configmap" in taken:
        name = f"{rng.choice(['audit', 'export', 'digest'])}-{token}"
        objects.append({"apiVersion": "apps/v1", "kind": "Deployment",
                        "metadata": {"name": name, "namespace": TEAM, "labels": OTHER_TEAM},
                        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                                 "template": {"metadata": {"labels": {"app": name}},
                                              "spec": {"containers": [{"name": "job",
                                                                       "image": "registry.example/pause:3.10"}],
                                                       "volumes": [{"name": "settings",
                                                                    "configMap": {"name": "legacy-config"}}]}}}})
    lab.apply(objects)
    lab.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": HANDOVER, "namespace": NAMESPACE},
               "data": {"objects": str(len(objects))}})
