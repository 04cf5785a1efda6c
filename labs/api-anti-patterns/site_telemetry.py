"""A site full of edge devices reports to the site recorder, and the Site's status takes the weight.

The devices are simulated here: each reading is about 1 KiB of JSON (a few values and a base64 frame of
raw vibration samples), sent in batches to the recorder's ingest endpoint, as a gateway would. Every
figure comes from the cluster or from the recorder's own metrics: the Site's size as the API server
serves it, the API server's count of status updates by HTTP code, the recorder's archive count.
"""

from __future__ import annotations

import base64
import datetime
import json
import os
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from krmcourse import Lab
from krmcourse.apiload import Metrics, running_metrics_url, scrape, scrape_apiserver
from krmcourse.credentials import connection
from krmcourse.errors import KrmcourseError

RECORDER = "site-recorder"
NAMESPACE = "inventory"
SITE = "harbour"
SITE_PATH = f"/apis/inventory.krmcourse.dev/v1alpha1/namespaces/{NAMESPACE}/sites/{SITE}"
DEVICES = 410
KIB = 1024
MIB = 1024 * KIB
_INGEST_LINE = re.compile(r"ingest: (http://127\.0\.0\.1:\d+/readings)")


def reading(device: int, seq: int) -> dict[str, Any]:
    """One reading of one device: about 1 KiB of JSON."""
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return {
        "device": f"dev-{device:06d}",
        "seq": seq,
        "at": now,
        "values": {"temperature": 18 + seq % 70 / 10, "battery": 3.3 + seq % 9 / 10},
        "frame": base64.b64encode(os.urandom(720)).decode(),
    }


def _log(lab: Lab) -> str:
    return lab.logs(RECORDER, lines=1_000_000) if RECORDER in lab.running() else ""


def _last(pattern: re.Pattern[str], text: str) -> str | None:
    found = pattern.findall(text)
    return found[-1] if found else None


def ingest_url(lab: Lab) -> str | None:
    """Where the running recorder takes readings (None when no recorder runs)."""
    return _last(_INGEST_LINE, _log(lab))


def recorder_metrics(lab: Lab) -> Metrics:
    """The running recorder's own counters."""
    url = running_metrics_url(lab, RECORDER)
    if url is None:
        raise LookupError("The site recorder has not printed its metrics URL; is it running?")
    return scrape(url)


def site_bytes(lab: Lab) -> int:
    """The Site's size in bytes, as the API server serves it (JSON, managedFields included)."""
    return len(lab.kubectl("get", "--raw", SITE_PATH).encode())


def status(lab: Lab) -> dict[str, Any]:
    site = lab.get("site.inventory.krmcourse.dev", SITE, namespace=NAMESPACE)
    if site is None:
        raise LookupError(f"There is no Site {NAMESPACE}/{SITE}; did the lab come up?")
    return dict(site.get("status") or {})


@dataclass
class Storm:
    """What one storm sent, what the recorder answered, and what the API server and the Site show."""

    sent: int = 0
    batches: int = 0
    answers: dict[int, int] = field(default_factory=dict)
    messages: list[str] = field(default_factory=list)
    bytes_before: int = 0
    bytes_halfway: int = 0
    bytes_after: int = 0
    received_before: int = 0
    received_after: int = 0
    archived: int = 0
    record_failures: int = 0
    refused: dict[str, int] = field(default_factory=dict)
    written: int = 0

    def summary(self) -> dict[str, Any]:
        return {
            "readings sent": self.sent,
            "status updates accepted (API server)": self.written,
            "status updates refused (API server, by HTTP code)": self.refused or "none",
            "Site KiB before / halfway / after": (f"{self.bytes_before / KIB:.0f} / {self.bytes_halfway / KIB:.0f}"
                                                  f" / {self.bytes_after / KIB:.0f}"),
            "status.received went up by": self.received_after - self.received_before,
            "archive gained (recorder's metrics)": self.archived,
            "first refusal, in the API server's words": self.messages[0] if self.messages else "none",
        }


def storm(lab: Lab, readings: int = 3000, batch: int = 100) -> Storm:
    """Send ``readings`` readings from the site's devices, ``batch`` at a time, and measure.

    3,000 readings of about 1 KiB are about 3 MiB of data: twice what etcd takes in one request.
    """
    url = ingest_url(lab)
    if url is None:
        raise LookupError("No site recorder is running: start it with lab.start('site-recorder', ...).")
    result = Storm()
    before_api, before_rec = scrape_apiserver(lab), recorder_metrics(lab)
    result.bytes_before = site_bytes(lab)
    result.received_before = int(status(lab).get("received") or 0)
    with httpx.Client(timeout=120) as client:
        for number in range(readings // batch):
            if number == readings // batch // 2:
                result.bytes_halfway = site_bytes(lab)
            seq = result.received_before + number * batch
            body = [reading((seq + i) % DEVICES, seq + i) for i in range(batch)]
            answer = client.post(url, json=body)
            result.sent += batch
            result.batches += 1
            result.answers[answer.status_code] = result.answers.get(answer.status_code, 0) + 1
            message = answer.json().get("message") if answer.content else None
            if not answer.is_success and message and message not in result.messages:
                result.messages.append(message)
    result.bytes_after = site_bytes(lab)
    result.received_after = int(status(lab).get("received") or 0)
    api = scrape_apiserver(lab) - before_api
    rec = recorder_metrics(lab) - before_rec
    codes = api.by("apiserver_request_total", "code", resource="sites", subresource="status",
                   verb=("PUT", "PATCH", "APPLY"))
    result.written = round(sum(n for (code,), n in codes.items() if code.startswith("2")))
    result.refused = {code: round(n) for (code,), n in codes.items() if round(n) and code[0] in "45" and code != "409"}
    result.archived = round(rec.total("site_archived_readings"))
    result.record_failures = round(rec.total("site_record_failures_total"))
    return result


#: The device whose Device object gives the recorder work in the fault harness (faults/probe.yaml).
PROBE = "fault-probe"
_PROBE_PATH = f"/apis/inventory.krmcourse.dev/v1alpha1/namespaces/{NAMESPACE}/devices/{PROBE}"
_gateways: dict[str, threading.Thread] = {}  # by cluster (see _cluster)


def start_gateway(lab: Lab) -> threading.Thread:
    """The site's gateway for the fault harness (``prepare:`` in lab.yaml): a thread, one per cluster.

    The recorder watches nothing; readings are its only work. While Device inventory/fault-probe exists,
    the gateway sends the running recorder one reading of that device (again, at its new address, until the
    Site's history holds it: after a crash, say). While there is no such Device it takes that reading out of
    the Site again, as the lab's admin, so that a probe applied later finds it missing. It stops when the
    lab's kubeconfig changes or goes (a reset, ``down``).
    """
    cluster = _cluster(lab)
    if cluster not in _gateways or not _gateways[cluster].is_alive():
        _gateways[cluster] = threading.Thread(target=_gateway, args=(lab, cluster), name="site-gateway", daemon=True)
        _gateways[cluster].start()
    return _gateways[cluster]


def _cluster(lab: Lab) -> str:
    """Which cluster the lab has now: its kubeconfig, whose credentials a reset replaces ("" once it is down)."""
    return lab.kubeconfig.read_text() if lab.kubeconfig.is_file() else ""


def _gateway(lab: Lab, cluster: str) -> None:
    conn = connection(lab.kubeconfig)
    with (httpx.Client(base_url=conn.server, verify=conn.tls, headers=conn.headers, timeout=10) as api,
          httpx.Client(timeout=90) as devices):
        while _cluster(lab) == cluster:
            try:
                present = api.get(_PROBE_PATH).status_code == 200
                status = api.get(SITE_PATH).raise_for_status().json().get("status") or {}
                history = status.get("history") or []
                sent = [r for r in history if r.get("device") == PROBE]
                if present and not sent and (url := ingest_url(lab)):
                    devices.post(url, json=[{**reading(0, 0), "device": PROBE}])
                elif sent and not present:
                    kept = {"history": [r for r in history if r.get("device") != PROBE],
                            "received": max(0, int(status.get("received") or 0) - len(sent))}
                    api.patch(f"{SITE_PATH}/status", json={"status": kept},
                              headers={"Content-Type": "application/merge-patch+json"})
            except (httpx.HTTPError, OSError, ValueError, KrmcourseError):
                pass  # the API server restarting, the recorder killed: try again on the next round
            time.sleep(0.2)


def show(data: Any) -> str:
    return json.dumps(data, indent=2)
