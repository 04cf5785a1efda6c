"""The other clients of notebook 32's API server, for the exercises noisy-neighbour (G1) and watch-forecast (G2).

- The **neighbour** (``controllers/neighbour.py``) sends one kind of read request, about ten a second, and
  keeps no metrics of its own. Which verb and which resource are drawn for each opening; the learner finds
  them from kube-apiserver's own ``/metrics`` and reports them in the ConfigMap ``citizens/neighbour-report``
  (key ``request``, for example ``GET nodes``).
- The **fleet** is three processes of the Widget controller, each with its own switches (loops, polling,
  a watch on its ConfigMaps), drawn for each opening. The learner forecasts how many watches the fleet will
  hold open on widgets and on configmaps, in the ConfigMap ``citizens/watch-forecast`` (keys ``widgets`` and
  ``configmaps``), and then starts it and counts them on kube-apiserver.

Each draw is kept in the lab's state folder, beside the cluster, with the uid of the lab's namespace, so a
draw made for another cluster is never graded.
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from krmcourse import Lab, apiload

HERE = Path(__file__).resolve().parent
NS = "citizens"
GROUP = "citizens.krmcourse.dev"
RUN = f"{GROUP}/run"
NEIGHBOUR = "neighbour"
NEIGHBOUR_REPORT = "neighbour-report"
FORECAST = "watch-forecast"
FLEET_RUN = "fleet"

#: What the neighbour may ask for: (verb, resource) -> path. None of these resources is read by the lab's
#: own components (kube-controller-manager, the scheduler, the widget controllers) at any steady rate.
REQUESTS = {
    ("GET", "serviceaccounts"): f"/api/v1/namespaces/{NS}/serviceaccounts/default",
    ("LIST", "serviceaccounts"): f"/api/v1/namespaces/{NS}/serviceaccounts",
    ("GET", "gadgets"): f"/apis/{GROUP}/v1/namespaces/{NS}/gadgets/demo",
    ("LIST", "gadgets"): f"/apis/{GROUP}/v1/namespaces/{NS}/gadgets",
    ("LIST", "secrets"): f"/api/v1/namespaces/{NS}/secrets",
    ("LIST", "persistentvolumeclaims"): f"/api/v1/namespaces/{NS}/persistentvolumeclaims",
    ("LIST", "resourcequotas"): f"/api/v1/namespaces/{NS}/resourcequotas",
    ("GET", "namespaces"): f"/api/v1/namespaces/{NS}",
}
VERBS = ("GET", "LIST", "WATCH", "CREATE", "POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION")


def _cluster_id(lab: Lab) -> str | None:
    found = lab.get("namespace", NS)
    return None if found is None else str(found["metadata"]["uid"])


def _read(lab: Lab, name: str) -> dict[str, Any] | None:
    """A draw kept beside the cluster, when it was made for this cluster."""
    try:
        record = json.loads((lab.home / f"{name}.json").read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and record.get("cluster") == _cluster_id(lab) else None


def _write(lab: Lab, name: str, record: dict[str, Any]) -> Path:
    path = lab.home / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_suffix(".new")
    scratch.write_text(json.dumps(record, indent=1))
    scratch.replace(path)  # the neighbour reads the old draw or the new one, never half of one
    return path


def _answers(lab: Lab, configmap: str) -> dict[str, str] | None:
    found = lab.get("configmap", configmap, namespace=NS)
    return None if found is None else {k: str(v).strip() for k, v in (found.get("data") or {}).items()}


def _write_answers(lab: Lab, configmap: str, data: dict[str, Any]) -> None:
    lab.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": configmap, "namespace": NS},
               "data": {k: str(v) for k, v in data.items()}})


# --------------------------------------------------------------------------- G1: the neighbour
def neighbour_draw(lab: Lab) -> tuple[str, str] | None:
    """The (verb, resource) the neighbour of this cluster sends, or None when none was started here."""
    record = _read(lab, NEIGHBOUR)
    return None if record is None else (str(record["verb"]), str(record["resource"]))


def start_neighbour(lab: Lab, fresh: bool = False) -> None:
    """Start the neighbour (or find it running), with the draw made for this cluster or (``fresh``) a new one."""
    record = _read(lab, NEIGHBOUR)
    if record is None or fresh:
        verb, resource = secrets.choice(sorted(REQUESTS))
        record = {"cluster": _cluster_id(lab), "verb": verb, "resource": resource,
                  "path": REQUESTS[(verb, resource)], "pause": 0.1}
    config = _write(lab, NEIGHBOUR, record)
    proc = lab.run_controller(HERE / "controllers" / "neighbour.py", str(config), name=NEIGHBOUR)
    proc.wait_for_log("neighbour: running", timeout=60)


def stop_neighbour(lab: Lab) -> bool:
    return lab.stop(NEIGHBOUR)


def report_neighbour(lab: Lab, request: str) -> None:
    """Write the report: the neighbour's request as ``VERB resource``."""
    _write_answers(lab, NEIGHBOUR_REPORT, {"request": request})


def neighbour_report(lab: Lab) -> str | None:
    return (_answers(lab, NEIGHBOUR_REPORT) or {}).get("request")


def parse_request(text: str) -> tuple[str, str] | None:
    """``"LIST secrets"`` (either order, any case) -> ("LIST", "secrets"); None when it is not a verb and a resource."""
    words = text.replace(",", " ").split()
    if len(words) != 2:
        return None
    verbs = [w for w in words if w.upper() in VERBS]
    if len(verbs) != 1:
        return None
    resource = next(w for w in words if w is not verbs[0])
    return verbs[0].upper(), resource.lower()


# --------------------------------------------------------------------------- G2: the fleet
@dataclass(frozen=True)
class Fleet:
    """Three Widget controller processes, each with the switches drawn for it."""

    processes: list[dict[str, Any]]

    def args(self, process: dict[str, Any]) -> list[str]:
        args = ["--selector", f"{RUN}={FLEET_RUN}", "--loops", ",".join(process["loops"])]
        if process["poll"]:
            args += ["--poll", "2"]
        if process["watch_children"]:
            args.append("--watch-children")
        return args

    def watches(self) -> dict[str, int]:
        """What the fleet holds open on kube-apiserver: one watch per cache and resource, whatever the loops."""
        return {"widgets": sum(not p["poll"] for p in self.processes),
                "configmaps": sum(bool(p["watch_children"]) for p in self.processes)}

    def __str__(self) -> str:
        lines = [f"{p['name']}:  widgetctl.py {' '.join(self.args(p))}" for p in self.processes]
        return "The fleet (not started yet):\n" + "\n".join(lines)


def _fleet_draw() -> list[dict[str, Any]]:
    """Three processes whose watches neither 'one per process', nor 'one per loop', nor 'one per ConfigMap loop'
    counts right, and which watch ConfigMaps at least once (so the shared-cache table's 1 and 0 are wrong too)."""
    rng = secrets.SystemRandom()
    while True:
        processes = []
        for i in range(3):
            loops = rng.choice([["configmap"], ["tally"], ["configmap", "tally"]])
            processes.append({"name": f"fleet-{i}", "loops": loops, "poll": rng.random() < 0.4,
                              "watch_children": "configmap" in loops and rng.random() < 0.5})
        if (any(p["poll"] for p in processes)
                and any(not p["poll"] and len(p["loops"]) == 2 for p in processes)
                and any("configmap" in p["loops"] and not p["watch_children"] for p in processes)
                and any(p["watch_children"] for p in processes)):
            return processes


def fleet(lab: Lab) -> Fleet | None:
    record = _read(lab, "fleet")
    return None if record is None else Fleet(record["processes"])


def open_fleet(lab: Lab, fresh: bool = False) -> Fleet:
    """The fleet drawn for this cluster, or (``fresh``, or none) a new draw; also the widgets it will look after."""
    current = fleet(lab)
    if current is not None and not fresh:
        return current
    stop_fleet(lab)
    drawn = _fleet_draw()
    _write(lab, "fleet", {"cluster": _cluster_id(lab), "processes": drawn})
    lab.apply([{"apiVersion": f"{GROUP}/v1", "kind": "Widget",
                "metadata": {"name": f"{FLEET_RUN}-{i}", "namespace": NS, "labels": {RUN: FLEET_RUN}},
                "spec": {"size": i + 1, "color": color}} for i, color in enumerate(("red", "green", "blue"))])
    return Fleet(drawn)


def forecast(lab: Lab, widgets: int, configmaps: int) -> None:
    """Write the forecast: how many watches the fleet will hold open, on widgets and on configmaps."""
    _write_answers(lab, FORECAST, {"widgets": widgets, "configmaps": configmaps})


def read_forecast(lab: Lab) -> dict[str, str] | None:
    return _answers(lab, FORECAST)


def start_fleet(lab: Lab) -> list[Any]:
    found = fleet(lab) or open_fleet(lab)
    procs = [lab.run_controller(HERE / "controllers" / "widgetctl.py", *found.args(p), name=p["name"])
             for p in found.processes]
    for proc in procs:
        proc.wait_for_log("synced", timeout=90)
    return procs


def stop_fleet(lab: Lab) -> None:
    for i in range(3):
        lab.stop(f"fleet-{i}")


def observe_fleet(lab: Lab, timeout: float = 90) -> dict[str, dict[str, int]]:
    """Start the fleet, count the watches it adds on kube-apiserver, stop it; returns forecast-able figures.

    The count is taken against the watches open just before (kube-controller-manager watches both resources
    too), and read until it matches what the fleet's switches say, or ``timeout`` passes.
    """
    found = fleet(lab) or open_fleet(lab)
    want = found.watches()
    before = apiload.open_watches(lab, "widgets", "configmaps")
    seen: dict[str, int] = {}
    try:
        start_fleet(lab)
        deadline = time.monotonic() + timeout
        while True:
            now = apiload.open_watches(lab, "widgets", "configmaps")
            seen = {r: now[r] - before[r] for r in now}
            if seen == want or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    finally:
        stop_fleet(lab)
    return {"added by the fleet": seen, "the fleet's switches say": want}
