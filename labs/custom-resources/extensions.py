"""Three more API groups for the exercise who-serves-it (C1): two served from CRDs, one by a server of its own.

``open_extensions(lab)`` registers three groups with made-up names, drawn anew for each opening: two are
CRDs (kube-apiserver serves them itself, and registers a ``Local`` APIService for each), and one is an
APIService that hands its group to a Service in ``store``. No server runs behind that Service (in some
draws the Service does not even exist, in others it listens on another port), so the aggregator marks the
APIService unavailable, with a reason that depends on the draw. Which group is which, and that reason,
are kept in the lab's state folder, beside the cluster, never in it: the learner finds them by reading
the cluster.

The learner's report goes into the ConfigMap ``store/extension-report``: ``aggregated`` names the group
(or its APIService, ``v1alpha1.<group>``) and ``reason`` the reason of its ``Available`` condition.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from krmcourse import Lab

NAMESPACE = "store"
REPORT = "extension-report"
VERSION = "v1alpha1"
DOMAIN = "example.org"  # not krmcourse.dev: the notebook's table of the course's own groups stays as it was
LABEL = "krmcourse.dev/extension-draw"
_WORDS = ["ledger", "forecast", "invoice", "shipment", "rota", "voucher", "tariff", "parcel", "roster"]


@dataclass(frozen=True)
class Extensions:
    """One opening: three groups, which one is aggregated, and what the aggregator said about it."""

    record: dict[str, Any]

    @property
    def groups(self) -> list[str]:
        return sorted(self.record["groups"])

    @property
    def aggregated(self) -> str:
        return str(self.record["aggregated"])

    @property
    def crd_groups(self) -> list[str]:
        return [g for g in self.groups if g != self.aggregated]

    @property
    def reason(self) -> str:
        return str(self.record["reason"])

    @property
    def service(self) -> str:
        return str(self.record["service"])

    def crd_name(self, group: str) -> str:
        return f"{self.record['plurals'][group]}.{group}"

    def __str__(self) -> str:
        return "Three more API groups, each at version v1alpha1: " + ", ".join(self.groups)


def apiservice_name(group: str) -> str:
    return f"{VERSION}.{group}"


def record_path(lab: Lab) -> Path:
    return lab.home / "extensions.json"


def _read(lab: Lab) -> Extensions | None:
    try:
        record = json.loads(record_path(lab).read_text())
    except (OSError, ValueError):
        return None
    return Extensions(record) if isinstance(record, dict) and "aggregated" in record else None


def _cluster_id(lab: Lab) -> str | None:
    """The uid of the lab's namespace, which a new cluster gives anew: a record made for another cluster is stale."""
    found = lab.get("namespace", NAMESPACE)
    return None if found is None else str(found["metadata"]["uid"])


def extensions(lab: Lab) -> Extensions | None:
    """The opening made for this cluster (whatever the learner has changed since), or None."""
    found = _read(lab)
    if found is None or found.record.get("cluster") != _cluster_id(lab):
        return None
    return found


def intact(lab: Lab, found: Extensions) -> bool:
    """Whether all three groups are still registered as they were opened."""
    return all(lab.get("customresourcedefinition", found.crd_name(g)) for g in found.crd_groups) and \
        lab.get("apiservice", apiservice_name(found.aggregated)) is not None


def _crd(group: str, word: str, draw: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{word}s.{group}", "labels": {LABEL: draw}},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"kind": word.capitalize(), "plural": f"{word}s", "singular": word},
                 "versions": [{"name": VERSION, "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                     "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]},
    }


def _apiservice(group: str, service: str, draw: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": apiservice_name(group), "labels": {LABEL: draw}},
        "spec": {"group": group, "version": VERSION, "groupPriorityMinimum": 1000, "versionPriority": 15,
                 "insecureSkipTLSVerify": True,
                 "service": {"namespace": NAMESPACE, "name": service, "port": 443}},
    }


def _service(name: str, draw: str, port: int) -> dict[str, Any]:
    """A Service with no selector and no endpoints: a name, and nobody behind it."""
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": {LABEL: draw}},
            "spec": {"ports": [{"port": port, "targetPort": 8443, "protocol": "TCP"}]}}


def close_extensions(lab: Lab) -> None:
    """Take every opening's groups, Services and the report away (the notebook's clean-up)."""
    for kind in ("apiservices", "customresourcedefinitions"):
        lab.kubectl("delete", kind, "-l", LABEL, "--ignore-not-found", "--wait=false")
    lab.kubectl("delete", "services", "-n", NAMESPACE, "-l", LABEL, "--ignore-not-found", "--wait=false")
    lab.kubectl("delete", "configmap", REPORT, "-n", NAMESPACE, "--ignore-not-found")


def open_extensions(lab: Lab, fresh: bool = False) -> Extensions:
    """The opening made for this cluster, or (``fresh=True``, or none) a new one, which closes the old one first.

    Returns once the aggregator has judged the new APIService and kube-apiserver has registered the CRDs' groups.
    """
    current = extensions(lab)
    if current is not None and not fresh:
        return current
    cluster = _cluster_id(lab)
    close_extensions(lab)
    rng = secrets.SystemRandom()
    draw = secrets.token_hex(3)
    words = rng.sample(_WORDS, 3)
    groups = {w: f"{w}-{secrets.token_hex(2)}.{DOMAIN}" for w in words}
    aggregated = words[rng.randrange(3)]
    service = f"{aggregated}-api-{secrets.token_hex(2)}"
    # No Service at all, a Service with nobody behind it, or one that listens on another port than the
    # APIService names: the aggregator gives each its own reason.
    setup = rng.choice(["no service", "no endpoints", "another port"])
    manifests = [_crd(groups[w], w, draw) for w in words if w != aggregated]
    if setup != "no service":
        manifests.append(_service(service, draw, port=443 if setup == "no endpoints" else 8443))
    manifests.append(_apiservice(groups[aggregated], service, draw))
    lab.apply(manifests)

    def judged() -> str | None:
        found = lab.get("apiservice", apiservice_name(groups[aggregated]))
        for c in ((found or {}).get("status") or {}).get("conditions") or []:
            if c.get("type") == "Available" and c.get("status") == "False" and c.get("reason"):
                # The aggregator may judge the APIService before its informer has seen the new Service.
                settled = (c["reason"] == "ServiceNotFound") == (setup == "no service")
                return str(c["reason"]) if settled else None
        return None

    reason = lab.wait_until(judged, timeout=30, message="the aggregator never judged the new APIService")
    lab.wait_until(lambda: all(lab.get("apiservice", apiservice_name(groups[w])) for w in words if w != aggregated),
                   timeout=30, message="kube-apiserver never registered the new CRDs' groups")
    record = {"id": draw, "cluster": cluster, "groups": sorted(groups.values()), "aggregated": groups[aggregated],
              "reason": reason, "setup": setup, "service": f"{NAMESPACE}/{service}",
              "plurals": {groups[w]: f"{w}s" for w in words}}
    path = record_path(lab)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1))
    return Extensions(record)


def report(lab: Lab, aggregated: str, reason: str) -> None:
    """Write the learner's report: which group a server of its own serves, and why it is unavailable."""
    lab.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": REPORT, "namespace": NAMESPACE},
               "data": {"aggregated": aggregated, "reason": reason}})


def read_report(lab: Lab) -> dict[str, str] | None:
    found = lab.get("configmap", REPORT, namespace=NAMESPACE)
    return None if found is None else {k: str(v).strip() for k, v in (found.get("data") or {}).items()}


def group_of(answer: str) -> str:
    """The group a report names: ``g``, ``v1alpha1.g`` (its APIService) or ``g/v1alpha1`` all mean ``g``."""
    answer = answer.strip().strip("/")
    if answer.endswith(f"/{VERSION}"):
        answer = answer[: -len(VERSION) - 1]
    if answer.startswith(f"{VERSION}."):
        answer = answer[len(VERSION) + 1:]
    return answer
