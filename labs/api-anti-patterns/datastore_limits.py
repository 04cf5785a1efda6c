"""Use the API as a data store, on purpose, and measure where it hurts.

Two kinds of limit. Size: the API server refuses a ConfigMap or Secret over 1 MiB and annotations over
256 KiB, and etcd refuses any request over its `--max-request-bytes` (1.5 MiB by default). Scale: every
object is listed, watched and cached by the API server, so lists, new watches and memory grow with the
count. Both are measured here against the lab's own API server.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import psutil

from krmcourse import KubectlError, Lab
from krmcourse.credentials import connection

KIB = 1024
MIB = 1024 * KIB
DEVICES = "/apis/inventory.krmcourse.dev/v1alpha1/namespaces/inventory/devices"


# --- size limits -----------------------------------------------------------------------------------


def _try_create(lab: Lab, manifest: dict[str, Any]) -> tuple[bool, str]:
    """Create (dry-run on the server, so nothing is stored) and return (accepted, the server's words)."""
    try:
        lab.kubectl("create", "--dry-run=server", "-o", "name", "-f", "-", input=json.dumps(manifest))
    except KubectlError as err:
        return False, " ".join(err.stderr.split())[:300]
    return True, "accepted"


def _store(lab: Lab, manifest: dict[str, Any]) -> tuple[bool, str]:
    """Really create, because only a real write reaches etcd; delete again when it succeeded."""
    try:
        lab.kubectl("create", "-o", "name", "-f", "-", input=json.dumps(manifest))
    except KubectlError as err:
        return False, " ".join(err.stderr.split())[:300]
    meta = manifest["metadata"]
    lab.delete(manifest["kind"].lower(), meta["name"], namespace=meta.get("namespace"))
    return True, "accepted (and deleted again)"


def _configmap(name: str, size: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "inventory"},
        "data": {"blob": "x" * size},
    }


def _annotated(name: str, size: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "inventory", "annotations": {"notes": "x" * size}},
    }


def _device_blob(name: str, size: int) -> dict[str, Any]:
    return {
        "apiVersion": "inventory.krmcourse.dev/v1alpha1",
        "kind": "Device",
        "metadata": {"name": name, "namespace": "inventory"},
        "spec": {"serial": name, "firmware": "x" * size},
    }


def size_limits(lab: Lab) -> list[dict[str, Any]]:
    """Probe each limit from just below and just above, and keep the server's own message."""
    probes = [
        ("ConfigMap data", 1000 * KIB, _try_create, _configmap("just-under", 1000 * KIB)),
        ("ConfigMap data", MIB + 64 * KIB, _try_create, _configmap("too-big", MIB + 64 * KIB)),
        ("annotations", 250 * KIB, _try_create, _annotated("notes-ok", 250 * KIB)),
        ("annotations", 260 * KIB, _try_create, _annotated("notes-too-long", 260 * KIB)),
        ("Device (custom resource)", 1400 * KIB, _store, _device_blob("firmware-1400k", 1400 * KIB)),
        ("Device (custom resource)", 1700 * KIB, _store, _device_blob("firmware-1700k", 1700 * KIB)),
    ]
    rows = []
    for what, size, send, manifest in probes:
        accepted, message = send(lab, manifest)
        rows.append({"what": what, "KiB": size // KIB, "accepted": accepted, "server says": message})
    return rows


# --- scale -----------------------------------------------------------------------------------------


@contextmanager
def http_client(kubeconfig: Path) -> Iterator[httpx.Client]:
    """An httpx client with the kubeconfig's credentials, for requests kubectl would be too slow for."""
    conn = connection(kubeconfig)
    with httpx.Client(
        base_url=conn.server,
        verify=conn.tls,
        headers=conn.headers,
        timeout=60,
        limits=httpx.Limits(max_connections=16),
    ) as client:
        yield client


def device(index: int) -> dict[str, Any]:
    """One small inventory record, about 1 KiB of JSON: a sensor-laden edge device."""
    return {
        "apiVersion": "inventory.krmcourse.dev/v1alpha1",
        "kind": "Device",
        "metadata": {"name": f"dev-{index:06d}", "labels": {"site": f"site-{index % 50}"}},
        "spec": {
            "serial": f"SN{index:010d}",
            "model": "edge-gw-3",
            "site": f"site-{index % 50}",
            "sensors": [
                {"name": f"sensor-{i}", "unit": "celsius", "calibration": 1.0 + i / 100} for i in range(12)
            ],
        },
    }


def create_devices(client: httpx.Client, start: int, stop: int, workers: int = 8) -> float:
    """Create Devices start..stop-1 in parallel; return the seconds it took."""

    def post(index: int) -> None:
        response = client.post(DEVICES, json=device(index))
        if response.status_code not in (201, 409):
            raise RuntimeError(f"creating dev-{index}: HTTP {response.status_code} {response.text[:200]}")

    began = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(post, range(start, stop)))
    return time.perf_counter() - began


def time_list(client: httpx.Client, repeats: int = 3) -> tuple[float, int]:
    """Median seconds for a full list of Devices, and its size in bytes."""
    timings, size = [], 0
    for _ in range(repeats):
        began = time.perf_counter()
        response = client.get(DEVICES)
        response.raise_for_status()
        timings.append(time.perf_counter() - began)
        size = len(response.content)
    return statistics.median(timings), size


def time_new_watch(client: httpx.Client, expected: int, repeats: int = 2) -> tuple[float, int]:
    """A watch with no resourceVersion starts with one ADDED event per existing object.

    That is what every new informer (every controller start, every reconnect that must re-list) pays.
    Returns the fastest of `repeats` tries, in seconds until all `expected` events arrived, and the
    bytes they took.
    """
    if expected == 0:
        return 0.0, 0
    params = {"watch": "true", "timeoutSeconds": "60", "allowWatchBookmarks": "false"}
    best, size = float("inf"), 0
    for _ in range(repeats):
        began, seen, size = time.perf_counter(), 0, 0
        with client.stream("GET", DEVICES, params=params) as response:
            response.raise_for_status()
            for line in response.iter_lines():
                size += len(line)
                if json.loads(line).get("type") == "ADDED":
                    seen += 1
                    if seen >= expected:
                        break
        best = min(best, time.perf_counter() - began)
    return best, size


def apiserver_process(lab: Lab) -> psutil.Process:
    """The lab's kube-apiserver: the process serving this lab's secure port."""
    found = lab.component_pids().get("kube-apiserver")
    if found:
        return psutil.Process(found)
    port = urlparse(lab.server).port
    for proc in psutil.process_iter(["name", "cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        if (
            cmdline
            and "kube-apiserver" in os.path.basename(cmdline[0])
            and f"--secure-port={port}" in cmdline
        ):
            return proc
    for proc in psutil.process_iter(["name"]):  # fall back to whoever listens on the port
        try:
            if proc.info.get("name", "").startswith("kube-apiserver") and any(
                c.laddr.port == port for c in proc.net_connections(kind="tcp") if c.status == "LISTEN"
            ):
                return proc
        except (psutil.AccessDenied, psutil.NoSuchProcess):
            continue
    raise LookupError(f"No kube-apiserver process found for {lab.server}; is the lab up?")


def measure_scale(lab: Lab, counts: tuple[int, ...] = (0, 1000, 2000, 4000)) -> list[dict[str, float]]:
    """Grow the Device inventory step by step and measure the API server at each step."""
    apiserver = apiserver_process(lab)
    rows = []
    with http_client(lab.kubeconfig) as client:
        if client.get(DEVICES, params={"limit": "1"}).json()["items"]:
            delete_devices(lab)  # a re-run starts from an empty inventory again
        have = 0
        for count in counts:
            create_seconds = create_devices(client, have, count) if count > have else 0.0
            created = count - have
            have = count
            list_seconds, list_bytes = time_list(client)
            watch_seconds, watch_bytes = time_new_watch(client, count)
            rows.append(
                {
                    "objects": count,
                    "create per second": round(created / create_seconds) if create_seconds else 0,
                    "list ms": round(list_seconds * 1000, 1),
                    "list MiB": round(list_bytes / MIB, 2),
                    "new watch ms": round(watch_seconds * 1000, 1),
                    "new watch MiB": round(watch_bytes / MIB, 2),
                    "apiserver RSS MiB": round(apiserver.memory_info().rss / MIB),
                }
            )
    return rows


def delete_devices(lab: Lab) -> None:
    """One DELETE for the whole collection, then wait until it is empty."""
    with http_client(lab.kubeconfig) as client:
        client.delete(DEVICES).raise_for_status()
        deadline = time.monotonic() + 60
        while client.get(DEVICES, params={"limit": "1"}).json()["items"]:
            if time.monotonic() > deadline:
                raise TimeoutError("Devices are still being deleted after 60 s")
            time.sleep(0.5)


def plot_scale(rows: list[dict[str, float]]):  # noqa: ANN201 - a matplotlib Figure
    """Three panels against the object count: list latency, new-watch latency, API server memory."""
    import matplotlib.pyplot as plt

    counts = [r["objects"] for r in rows]
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.2))
    for ax, key, color in zip(
        axes,
        ("list ms", "new watch ms", "apiserver RSS MiB"),
        ("tab:blue", "tab:orange", "tab:green"),
        strict=True,
    ):
        ax.plot(counts, [r[key] for r in rows], marker="o", color=color)
        ax.set_xlabel("Device objects")
        ax.set_title(key)
        ax.grid(alpha=0.3)
    fig.suptitle("Measured on this lab's API server (absolute numbers vary from machine to machine)")
    fig.tight_layout()
    return fig
