"""Plumbing for the slow-infrastructure notebook and its exercises: start the metal service and the
controller, create Servers, and turn what was recorded into measurements.

Times come from records the work left behind: the controller's `status.operationHistory` and the metal
service's own start and end of each inspection (same host clock as this process), so measuring needs no
polling loop racing the controller.
"""

from __future__ import annotations

import datetime
import json
import os
import socket
import textwrap
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from krmcourse import Lab, ManagedProcess, UsageError
from krmcourse.apiload import Metrics, running_metrics_url, scrape

HERE = Path(__file__).parent
NAMESPACE = "dc1"
TERMINAL = ("Provisioned", "Error")
CONTROLLER_SA = ("server-controller", "krm-system")
CONTROLLER = "server-controller"
#: The name under which lab.save_code keeps the controller's Registering/Inspecting step.
STEP = "inspect-step"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class MetalService:
    """The running metal service: the process and its URL."""

    process: ManagedProcess | None  # None when found running (see running_metal_service)
    url: str

    def stats(self) -> dict[str, Any]:
        return dict(httpx.get(f"{self.url}/stats", timeout=5).json())

    def host(self, host_id: str) -> dict[str, Any] | None:
        response = httpx.get(f"{self.url}/hosts/{host_id}", timeout=5)
        return None if response.status_code == 404 else dict(response.json())


def start_metal_service(
    lab: Lab, seconds_per_minute: float = 0.2, inspect_minutes: float = 15
) -> MetalService:
    """Start the external system, or adopt the lab's running one when it runs with these settings.

    It keeps its port while the lab runs it, so a notebook, a solution and a check all find the same
    service. It gets no kubeconfig at all: it cannot reach the API if it tried.
    """
    remembered = lab.home / "metal-service.port"
    remembered.parent.mkdir(parents=True, exist_ok=True)
    if "metal-service" in lab.running() and remembered.is_file():
        port = int(remembered.read_text())
    else:
        port = free_port()
        remembered.write_text(str(port))
    process = lab.run_controller(
        HERE / "metal_service.py",
        "--port",
        str(port),
        "--seconds-per-minute",
        str(seconds_per_minute),
        "--inspect-minutes",
        str(inspect_minutes),
        name="metal-service",
        kubeconfig=Path(os.devnull),
    )
    lab.wait_until(lambda: _healthy(f"http://127.0.0.1:{port}"), timeout=30, interval=0.1,
                   message="the metal service did not answer")
    return MetalService(process, f"http://127.0.0.1:{port}")


def running_metal_service(lab: Lab) -> MetalService | None:
    """The lab's metal service as it runs now, whatever its settings, or None."""
    remembered = lab.home / "metal-service.port"
    if "metal-service" not in lab.running() or not remembered.is_file():
        return None
    return MetalService(None, f"http://127.0.0.1:{int(remembered.read_text())}")


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def inspect_directly(metal: MetalService, host_id: str) -> float:
    """Do what a blocking reconcile does, by hand: register, inspect, and poll until done. Returns seconds."""
    began = time.perf_counter()
    httpx.post(f"{metal.url}/hosts", json={"id": host_id}, timeout=5).raise_for_status()
    httpx.post(f"{metal.url}/hosts/{host_id}/inspect", json={}, timeout=5).raise_for_status()
    while (metal.host(host_id) or {}).get("state") != "inspected":
        time.sleep(0.1)
    return time.perf_counter() - began


def start_controller(
    lab: Lab,
    metal: MetalService,
    step: Path,
    callbacks: bool = False,
    work_seconds: float = 2.0,
) -> ManagedProcess:
    """Run the Server controller, under its own least-privilege ServiceAccount, with the step in ``step``
    (a file written by ``lab.save_code``). With ``callbacks``, the metal service calls it back."""
    return lab.start(CONTROLLER, *controller_args(metal, step, callbacks, work_seconds))


def controller_args(metal: MetalService, step: Path, callbacks: bool = False, work_seconds: float = 2.0) -> list[str]:
    """The Server controller's arguments: where the metal service is, and the file with its step."""
    args = ["--metal", metal.url, "--namespace", NAMESPACE, "--step", str(step), "--work-seconds", str(work_seconds)]
    if callbacks:
        args += ["--callback-port", str(free_port())]
    return args


def prepare_faults(lab: Lab) -> list[str]:
    """For the fault harness (``converges.prepare`` in lab.yaml), which starts the controller itself: the
    metal service beside it, and the arguments that give it that service and the step that exercise
    return-promptly's solution saved (``converges.at`` makes the lab solve it first)."""
    step = lab.home / "code" / f"{STEP.replace('-', '_')}.py"  # where lab.save_code(STEP, ...) keeps it
    if not step.is_file():
        raise UsageError(f"The server controller's step {step} is not saved yet.",
                         f"Solve return-promptly first: krmcourse up {lab.name} --at state-enum.")
    return controller_args(start_metal_service(lab), step)


def controller_metrics(lab: Lab) -> Metrics:
    """The running controller's own counters, from the metrics URL it printed when it started."""
    url = running_metrics_url(lab, CONTROLLER)
    if url is None:
        raise LookupError("the server controller is not running")
    return scrape(url)


def create_servers(lab: Lab, names: list[str]) -> float:
    """Create Servers in one request; return the wall-clock time just before it was sent."""
    items = [
        {
            "apiVersion": "metal.krmcourse.dev/v1alpha1",
            "kind": "Server",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {},
        }
        for name in names
    ]
    sent = time.time()
    lab.kubectl("create", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    return sent


def servers(lab: Lab, names: list[str]) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in lab.objects("servers.metal.krmcourse.dev", NAMESPACE)
            if o["metadata"]["name"] in names}


def wait_finished(lab: Lab, names: list[str], timeout: float = 60) -> dict[str, dict[str, Any]]:
    """Wait until every named Server is in a terminal state, polling twice a second."""

    def finished() -> dict[str, dict[str, Any]] | None:
        found = servers(lab, names)
        done = len(found) == len(names) and all(
            o.get("status", {}).get("state") in TERMINAL for o in found.values()
        )
        return found if done else None

    return lab.wait_until(
        finished,
        timeout=timeout,
        interval=0.5,
        message=f"Servers {names} did not all reach {' or '.join(TERMINAL)}",
    )


def _epoch(stamp: str | None) -> float | None:
    return datetime.datetime.fromisoformat(stamp).timestamp() if stamp else None


def timings(found: dict[str, dict[str, Any]], sent: float, metal: MetalService) -> list[dict[str, Any]]:
    """Per Server: seconds from the create request to the start and end of its inspection (the metal
    service's own record), and to the end of its provisioning (the controller's)."""
    rows = []
    for name, obj in sorted(found.items()):
        status = obj.get("status", {})
        history = status.get("operationHistory", {})
        host = metal.host(f"{NAMESPACE}.{name}") or {}
        end = _epoch(history.get("provision", {}).get("end"))
        began, ended = host.get("inspectionStarted"), host.get("inspectionFinished")
        rows.append(
            {
                "server": name,
                "state": status.get("state"),
                "states seen": " → ".join(s for s, op in (("Registering", "register"), ("Inspecting", "inspect"),
                                                           ("Provisioning", "provision")) if op in history),
                "inspection began after s": round(began - sent, 2) if began else None,
                "inspection ended after s": round(ended - sent, 2) if ended else None,
                "finished after s": round(end - sent, 2) if end else None,
            }
        )
    return rows


def overlapped(rows: list[dict[str, Any]]) -> bool:
    """Whether some inspection began before another had ended: the controller did not wait for each."""
    spans = sorted((r["inspection began after s"], r["inspection ended after s"]) for r in rows)
    return any(later[0] < earlier[1] for earlier, later in zip(spans, spans[1:], strict=False))


def _span(times: dict[str, str] | None) -> float | None:
    start, end = _epoch((times or {}).get("start")), _epoch((times or {}).get("end"))
    return round(end - start, 2) if start and end else None


def jobs(lab: Lab) -> list[dict[str, Any]]:
    """The controller's Jobs, with their completion condition and owner."""
    rows = []
    for job in lab.objects("jobs", NAMESPACE, selector="metal.krmcourse.dev/server"):
        conditions = {c["type"]: c["status"] for c in job.get("status", {}).get("conditions", [])}
        rows.append(
            {
                "job": job["metadata"]["name"],
                "owner": job["metadata"]["ownerReferences"][0]["name"],
                "succeeded pods": job.get("status", {}).get("succeeded", 0),
                "Complete": conditions.get("Complete", "-"),
            }
        )
    return rows


def status_writers(lab: Lab) -> Counter[str]:
    """Who wrote Server status, according to the API server's own audit log."""
    writers: Counter[str] = Counter()
    log = lab.audit_log
    if log is None or not Path(log).is_file():
        raise FileNotFoundError("This lab's cluster has no audit log; was it started with audit: false?")
    with open(log) as handle:
        for line in handle:
            event = json.loads(line)
            ref = event.get("objectRef", {})
            if (
                ref.get("resource") == "servers"
                and ref.get("subresource") == "status"
                and event.get("verb") in ("patch", "update")
                and event.get("stage") == "ResponseComplete"
                and "dryRun=" not in event.get("requestURI", "")
            ):
                writers[event["user"]["username"]] += 1
    return writers


def plot_comparison(blocking: list[dict[str, Any]], prompt: list[dict[str, Any]]):  # noqa: ANN201 - a Figure
    """Side by side: when each host was being inspected (bars), and when each Server was finished (dots)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3), sharex=True)
    for ax, rows, title in ((axes[0], blocking, "blocking step"), (axes[1], prompt, "prompt step")):
        labels = [r["server"] for r in rows]
        began = [r["inspection began after s"] or 0 for r in rows]
        lasted = [(r["inspection ended after s"] or 0) - b for r, b in zip(rows, began, strict=True)]
        ax.barh(labels, lasted, left=began, color="tab:orange", label="host inspecting")
        ax.plot([r["finished after s"] or 0 for r in rows], labels, "o", color="tab:green", label="Provisioned")
        ax.set_title(title)
        ax.set_xlabel("seconds after the Servers were created")
        ax.grid(axis="x", alpha=0.3)
    axes[0].legend(loc="lower right")
    fig.tight_layout()
    return fig


def show_source(function: str) -> str:
    """The source of one method of the controller, read from its file, for the notebook to print."""
    import ast

    path = HERE / "controllers" / "server_controller.py"
    text = path.read_text()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.AsyncFunctionDef | ast.FunctionDef) and node.name == function:
            return textwrap.dedent("\n".join(text.splitlines()[node.lineno - 1 : node.end_lineno]))
    raise LookupError(f"{path.name} has no function {function}")


def delete_servers(lab: Lab, names: list[str]) -> None:
    lab.kubectl("delete", "servers.metal.krmcourse.dev", "-n", NAMESPACE, *names, "--ignore-not-found")
