"""Plumbing for the one-loop-per-pattern lab: run the operator, scrape its metrics, read conditions.

The metrics are scraped live from the operator's own /metrics endpoint and parsed with
prometheus-client's parser, the same text format Prometheus itself scrapes.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx
from prometheus_client.parser import text_string_to_metric_families

from krmcourse import Lab, ManagedProcess
from krmcourse.webhooks import free_port

OPERATOR_NAMESPACE = "ops"
SERVICE_ACCOUNT = "queue-operator"
COUNTER = "queue_operator_reconciles"


@dataclass
class Operator:
    """A running queue operator: its process and where its metrics are served."""

    process: ManagedProcess
    mode: str
    namespace: str
    metrics_port: int

    def stop(self) -> None:
        self.process.stop()

    def logs(self, loop: str | None = None) -> list[str]:
        """Log lines, optionally only those of one loop (``[composite]``, ``[governor]``, ``[tangled]``)."""
        lines = self.process.logs().splitlines()
        return [line for line in lines if loop is None or f"[{loop}]" in line]

    def scrape(self) -> str:
        """The raw Prometheus text from the operator's /metrics endpoint, fetched now."""
        response = httpx.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5)
        response.raise_for_status()
        return response.text

    def reconciles(self) -> dict[tuple[str, str], float]:
        """queue_operator_reconciles_total by (loop, result), from a live scrape."""
        counts: dict[tuple[str, str], float] = {}
        for family in text_string_to_metric_families(self.scrape()):
            if family.name != COUNTER:
                continue
            for sample in family.samples:
                if sample.name == f"{COUNTER}_total":
                    counts[(sample.labels["loop"], sample.labels["result"])] = sample.value
        return counts


_RUNNING: dict[tuple[str, str, str], Operator] = {}

#: What each loop does to the API in its namespace: (verb, resource, subresource).
LOOP_REQUESTS = {
    "governor": [("list", "queueworkers.ops.krmcourse.dev", ""), ("patch", "queueworkers.ops.krmcourse.dev", "status"),
                 ("get", "configmaps", ""), ("get", "deployments", "scale"), ("patch", "deployments", "scale")],
    "composite": [("create", "deployments", ""), ("patch", "deployments", "")],
}


def permissions(lab: Lab, accounts: list[str], namespace: str = "separate") -> list[dict[str, object]]:
    """Each loop's requests, and whether each account (``ops/governor-loop``) may make them in
    ``namespace``: the API server's own answers (SubjectAccessReviews)."""
    return [{"loop": loop, "request": f"{verb} {resource.split('.')[0]}{'/' + sub if sub else ''}",
             **{who: lab.can_i(who, verb, resource, namespace, sub) for who in accounts}}
            for loop, asks in LOOP_REQUESTS.items() for verb, resource, sub in asks]


def start(lab: Lab, mode: str, namespace: str, period: float = 1.0) -> Operator:
    """Run the operator in ``mode`` (separate or tangled) for ``namespace``, as queue-operator."""
    if mode not in ("separate", "tangled"):
        raise ValueError(f"mode must be 'separate' or 'tangled', not {mode!r}")
    port = free_port()
    process = lab.run_controller(
        lab.path / "controllers" / "queue_operator.py",
        "--mode",
        mode,
        "--namespace",
        namespace,
        "--metrics-port",
        str(port),
        "--period",
        str(period),
        name=f"queue-operator-{mode}",
        kubeconfig=lab.kubeconfig_for(SERVICE_ACCOUNT, OPERATOR_NAMESPACE),
    )
    process.wait_for_log("started in namespace", timeout=30)
    operator = Operator(process, mode, namespace, port)
    _RUNNING[(lab.server, mode, namespace)] = operator
    return operator


def create_workload(lab: Lab, namespace: str) -> None:
    """The two QueueWorkers and their queues (one of them broken) in ``namespace``.

    The invoices queue also lists the invoices waiting in it (``data.items``, one id a line), drawn once per
    queue: how many differs from one lab cluster to the next (never 14), and only the broken ``length`` fails
    to say so. That list is what the fix-the-signal exercise repairs the length from.
    """
    lab.kubectl("apply", "-n", namespace, "-f", str(lab.path / "workload" / "queues.yaml"))
    queue = lab.get("configmap", "invoices-queue", namespace=namespace) or {}
    if "items" not in (queue.get("data") or {}):
        import json
        import secrets

        rng = secrets.SystemRandom()
        count = rng.choice([n for n in range(6, 46) if n != 14])
        ids = sorted(rng.sample(range(10000, 99999), count))
        lab.kubectl("patch", "configmap", "invoices-queue", "-n", namespace, "--type=merge",
                    "-p", json.dumps({"data": {"items": "\n".join(f"INV-{i}" for i in ids)}}))


def backlog(lab: Lab, namespace: str, queue: str = "invoices-queue") -> int | None:
    """How many items the queue lists (None when it lists none)."""
    data = (lab.get("configmap", queue, namespace=namespace) or {}).get("data") or {}
    if "items" not in data:
        return None
    return len([line for line in data["items"].splitlines() if line.strip()])


def conditions(lab: Lab, namespace: str, name: str) -> dict[str, dict]:
    """A QueueWorker's conditions by type."""
    worker = lab.get("queueworker.ops.krmcourse.dev", name, namespace=namespace) or {}
    return {c["type"]: c for c in worker.get("status", {}).get("conditions", [])}


def condition_is(lab: Lab, namespace: str, name: str, kind: str, status: str) -> bool:
    return conditions(lab, namespace, name).get(kind, {}).get("status") == status


def replicas(lab: Lab, namespace: str, deployment: str) -> int | None:
    obj = lab.get("deployment", deployment, namespace=namespace)
    return None if obj is None else int(obj["spec"].get("replicas", 1))


def field_managers(lab: Lab, namespace: str, kind: str, name: str) -> list[str]:
    """Who wrote an object, as "manager (operation[/subresource])" from metadata.managedFields."""
    obj = lab.get(kind, name, namespace, show_managed_fields=True)
    assert obj is not None, f"{kind} {namespace}/{name} is not there"
    rows = []
    for entry in obj["metadata"].get("managedFields", []):
        sub = f"/{entry['subresource']}" if entry.get("subresource") else ""
        rows.append(f"{entry['manager']} ({entry['operation']}{sub})")
    return rows


def ensure_separate(lab: Lab, namespace: str = "separate") -> Operator:
    """The running separate-mode operator for ``namespace``, started if there is none (used by solve())."""
    running = _RUNNING.get((lab.server, "separate", namespace))
    if running is not None and running.process.alive:
        return running
    return start(lab, "separate", namespace)
