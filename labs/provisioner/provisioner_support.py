"""Plumbing for the provisioner lab: start the pretend cloud and the provisioner, and read results.

The notebook, the exercise checks and the tests call these so their cells show the idea rather than
process and port handling. The cloud runs as a process the Lab manages (``python krmcourse/cloud.py``),
so ``lab.down()`` stops it with everything else; its address goes into the ConfigMap that the
provisioner reads, which is also how a check in another process finds it.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import krmcourse.cloud
from krmcourse import Lab, ManagedProcess
from krmcourse.cloud import CloudClient
from krmcourse.webhooks import free_port

NAMESPACE = "krm-system"
SERVICE_ACCOUNT = "provisioner"
CONFIG = "provisioner-config"
TEAM = "team-a"

@dataclass
class Timing:
    """How long reconcile steps took, read from the provisioner's own log lines."""

    seconds: list[float]
    reasons: list[str]


def cloud(lab: Lab, timeout: float = 5.0) -> CloudClient:
    """A client for the cloud that this lab's provisioner is configured to use."""
    cm = lab.get("configmap", CONFIG, namespace=NAMESPACE)
    if cm is None:
        raise RuntimeError(
            f"The cloud is not set up: ConfigMap {NAMESPACE}/{CONFIG} is missing. Run start_cloud(lab) first."
        )
    return CloudClient(cm["data"]["cloudURL"], timeout=timeout)


def start_cloud(lab: Lab, provision_seconds: float = 1.0, client_timeout: float = 2.0) -> CloudClient:
    """Start the cloud beside the cluster (or reuse a healthy one) and tell the provisioner where it is."""
    if "cloud" in lab.running():  # whoever started it: reuse it, with its buckets
        client = cloud(lab)
        if client.healthy():
            client.reset()
            client.set_faults(provision_seconds=provision_seconds)
            return client
    # On a port chosen here, not by the cloud: a restored snapshot starts the cloud again with these
    # arguments, and the address in the provisioner's ConfigMap stays true.
    proc = lab.run_controller(
        Path(krmcourse.cloud.__file__), "--port", str(free_port()), "--provision-seconds", str(provision_seconds),
        name="cloud"
    )
    proc.wait_for_log("cloud listening on", timeout=20)
    match = re.search(r"cloud listening on (http://\S+)", proc.logs())
    if match is None:
        raise RuntimeError(f"The cloud started but did not say where it listens:\n{proc.logs()}")
    lab.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": CONFIG, "namespace": NAMESPACE},
            "data": {"cloudURL": match.group(1), "cloudTimeout": str(client_timeout)},
        }
    )
    return CloudClient(match.group(1))


def start_provisioner(lab: Lab) -> ManagedProcess:
    """Run the reference provisioner as its own ServiceAccount (least privilege), once per cluster."""
    return lab.start("provisioner")


def ensure_running(lab: Lab) -> CloudClient:
    """The cloud and the provisioner both up: what every exercise solution needs.

    A cloud that answers where the lab's configuration says is used as it is, whoever started it (a
    notebook, or an earlier ``krmcourse solve``): starting another would lose the buckets it holds.
    """
    try:
        client: CloudClient | None = cloud(lab)
    except RuntimeError:  # not configured yet
        client = None
    if client is None or not client.healthy():
        client = start_cloud(lab)
    start_provisioner(lab)
    return client


def stop_all(lab: Lab) -> None:
    """Stop the provisioner, then the cloud (the Lab would also do this on down())."""
    for name in ("provisioner", "cloud"):
        lab.stop(name)


def bucket(lab: Lab, name: str, namespace: str = TEAM) -> dict[str, Any] | None:
    return lab.get("bucket", name, namespace=namespace)


def spec_written_by_hand(lab: Lab, obj: dict[str, Any]) -> list[str]:
    """Spec fields that the person applying the object wrote themselves, as far as the API can tell.

    ``kubectl apply`` keeps what it sent in the last-applied-configuration annotation; server-side
    apply records the applied fields in ``managedFields`` (operation Apply). A plain create cannot be
    told apart from defaulting (defaults are filled in before fields are attributed), so it counts as
    clean.
    """
    meta = obj["metadata"]
    last = (meta.get("annotations") or {}).get("kubectl.kubernetes.io/last-applied-configuration")
    fields = set((json.loads(last).get("spec") or {}) if last else {})
    stored = lab.get("bucket", meta["name"], meta["namespace"], show_managed_fields=True) or {"metadata": {}}
    for entry in stored["metadata"].get("managedFields") or []:
        if entry.get("operation") == "Apply" and entry.get("subresource") != "status":
            fields |= {f.removeprefix("f:") for f in (entry.get("fieldsV1") or {}).get("f:spec") or {}} - {"."}
    return sorted(fields)


def ready(obj: dict[str, Any] | None) -> dict[str, Any]:
    """The Ready condition of a Bucket (an empty dict while there is none)."""
    conditions = ((obj or {}).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == "Ready"), {})


def wait_ready(lab: Lab, name: str, namespace: str = TEAM, timeout: float = 30) -> dict[str, Any]:
    """Wait until the provisioner reports Ready=True for the Bucket's current generation."""

    def done() -> dict[str, Any] | None:
        obj = bucket(lab, name, namespace)
        cond = ready(obj)
        if (
            obj
            and cond.get("status") == "True"
            and cond.get("observedGeneration") == obj["metadata"].get("generation")
        ):
            return obj
        return None

    return lab.wait_until(done, timeout=timeout, message=f"Bucket {namespace}/{name} never became Ready")


def wait_reason(lab: Lab, name: str, reason: str, namespace: str = TEAM, timeout: float = 30) -> float:
    """Wait until the Ready condition has this reason; return how many seconds that took."""
    started = time.monotonic()
    lab.wait_until(
        lambda: ready(bucket(lab, name, namespace)).get("reason") == reason,
        timeout=timeout,
        message=f"Bucket {namespace}/{name} never reported reason {reason}",
    )
    return time.monotonic() - started


def reconcile_timings(proc: ManagedProcess, since: int = 0) -> Timing:
    """Parse the provisioner's "reconcile took 0.12s -> Reason" lines, from character ``since`` on."""
    found = re.findall(r"reconcile took ([0-9.]+)s -> (\w+)", proc.logs()[since:])
    return Timing([float(s) for s, _ in found], [r for _, r in found])


def can_i(lab: Lab, verb: str, resource: str, namespace: str = TEAM) -> bool:
    """Ask the API server whether the provisioner's ServiceAccount may do this (real RBAC, not a guess)."""
    return lab.can_i(f"{NAMESPACE}/{SERVICE_ACCOUNT}", verb, resource, namespace)


# --------------------------------------------------------------------------- the team's request, drawn per cluster
REQUEST = "photos-request"  # a ConfigMap in team-a: what the team needs of its bucket photos
DEFAULTS = {"location": "local-1", "storageClass": "STANDARD", "versioning": False}  # as the CRD defaults them
CHOICES: dict[str, list[Any]] = {"location": ["local-1", "local-2", "far-away-1"],
                                 "storageClass": ["STANDARD", "NEARLINE", "COLDLINE"], "versioning": [False, True]}


def request(lab: Lab) -> dict[str, Any]:
    """The team's request for photos, typed ({} before :func:`file_request` has run)."""
    cm = lab.get("configmap", REQUEST, namespace=TEAM)
    data = (cm or {}).get("data") or {}
    if not all(k in data for k in DEFAULTS):
        return {}
    return {"location": data["location"], "storageClass": data["storageClass"],
            "versioning": data["versioning"] == "true"}


def _write_request(lab: Lab, wanted: dict[str, Any], **extra: str) -> None:
    data = {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in wanted.items()}
    lab.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": REQUEST, "namespace": TEAM},
               "data": {**data, **extra}})


def file_request(lab: Lab) -> dict[str, Any]:
    """Once per cluster, the team files what it needs of photos: drawn so that some of it is the CRD's default
    and some is not (so neither a bare name nor every field spelled out is the succinct request)."""
    import secrets

    wanted = request(lab)
    if wanted:
        return wanted
    rng = secrets.SystemRandom()
    while True:
        wanted = {k: rng.choice(v) for k, v in CHOICES.items()}
        differ = [k for k in DEFAULTS if wanted[k] != DEFAULTS[k]]
        if 0 < len(differ) < len(DEFAULTS):
            break
    _write_request(lab, wanted)
    return wanted


def change_class(lab: Lab) -> str:
    """Once per cluster, the team asks for photos in another storage class: drawn, never the one the request
    had, nor COLDLINE (the class the page once named)."""
    import secrets

    cm = lab.get("configmap", REQUEST, namespace=TEAM) or {}
    data = cm.get("data") or {}
    if "changedFrom" in data:
        return str(data["storageClass"])
    wanted = request(lab) or file_request(lab)
    options = [c for c in CHOICES["storageClass"] if c not in (wanted["storageClass"], "COLDLINE")]
    new = secrets.SystemRandom().choice(options)
    _write_request(lab, {**wanted, "storageClass": new}, changedFrom=wanted["storageClass"])
    return str(new)
