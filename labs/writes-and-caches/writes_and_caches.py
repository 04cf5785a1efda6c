"""The plumbing behind notebook 33: writing objects several ways, and caching Secrets three ways.

Like notebook 32, every figure comes from the lab's real API server: kube-apiserver's /metrics, the
responses it sends (status codes, managedFields), the controller's own metrics and its memory.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from krmcourse import apiload
from krmcourse.apiload import MERGE, SSA, Comparison, RestClient, message  # noqa: F401 - used by the notebook
from krmcourse.errors import KrmcourseError

warnings.filterwarnings("ignore", message="Kubernetes version .* is not supported")

HERE = Path(__file__).resolve().parent
CONTROLLERS = HERE / "controllers"
NS = "citizens"
VAULT = "vault"
GROUP = "citizens.krmcourse.dev"
WIDGETS = f"/apis/{GROUP}/v1/namespaces/{NS}/widgets"
SHARED = f"{WIDGETS}/shared"
METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"


def _own(metrics: apiload.Metrics, name: str, **match: Any) -> int:
    return round(metrics.total(name, **match))


# --------------------------------------------------------------------------- G5: writing
def fresh_widget(rest: RestClient, name: str, **spec: Any) -> dict:
    """Delete ``name`` if it exists and create it again, so a demonstration starts from a known state."""
    rest.call("DELETE", f"{WIDGETS}/{name}")
    _wait(lambda: rest.call("GET", f"{WIDGETS}/{name}").status_code == 404)
    return rest.ok("POST", WIDGETS, apply_body(name, **spec))


def _wait(fn: Callable[[], bool], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not fn():
        if time.monotonic() > deadline:
            raise TimeoutError("a widget was not deleted in time")
        time.sleep(0.1)


def apply_body(name: str, **spec: Any) -> dict:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Widget",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    }


def compare_writes(lab: Any, rest: RestClient, changes: int = 20) -> Comparison:
    """G5: change spec.size ``changes`` times by update (GET then PUT), by merge patch, and by apply."""
    name = "g5-writes"
    fresh_widget(rest, name, size=0)
    rows, loads = {}, {}
    for way in ("update", "merge patch", "server-side apply"):
        sent_before, received_before = rest.sent, rest.received
        with apiload.measure(lab, "widgets") as load:
            for i in range(changes):
                if way == "update":
                    obj = rest.ok("GET", f"{WIDGETS}/{name}")
                    obj["spec"]["size"] = i + 1
                    rest.ok("PUT", f"{WIDGETS}/{name}", obj)
                elif way == "merge patch":
                    rest.ok("PATCH", f"{WIDGETS}/{name}", {"spec": {"size": i + 1}}, content_type=MERGE)
                else:
                    rest.ok(
                        "PATCH",
                        f"{WIDGETS}/{name}",
                        apply_body(name, size=i + 1),
                        content_type=SSA,
                        params={"fieldManager": "g5-writer", "force": "true"},
                    )
        loads[way] = load
        rows[way] = {
            "requests": load.requests(),
            "bytes sent": rest.sent - sent_before,
            "bytes received": rest.received - received_before,
            "request body bytes (kube-apiserver)": round(
                load.delta.total(  # type: ignore[union-attr]
                    "apiserver_request_body_size_bytes_sum", resource="widgets"
                )
            ),
        }
    return Comparison(f"{changes} changes of spec.size, three ways", apiload.table(rows), loads)


def managers(obj: dict) -> Any:
    """Who owns which fields of an object, from metadata.managedFields."""
    import pandas as pd

    rows = []
    for entry in obj["metadata"].get("managedFields", []):
        fields = _leaves(entry.get("fieldsV1", {}))
        rows.append(
            {
                "manager": entry["manager"],
                "operation": entry["operation"],
                "subresource": entry.get("subresource", ""),
                "fields": ", ".join(fields),
            }
        )
    return pd.DataFrame(rows)


def _leaves(tree: dict, prefix: str = "") -> list[str]:
    out: list[str] = []
    for key, sub in tree.items():
        if key == ".":
            continue
        part = key[2:] if key.startswith(("f:", "k:")) else key
        path = f"{prefix}.{part}" if prefix else part
        if key.startswith("k:"):
            path = f"{prefix}[{part}]"
        if isinstance(sub, dict) and any(k != "." for k in sub):
            out += _leaves(sub, path)
        else:
            out.append(path)
    return out


# --------------------------------------------------------------------------- G6: caching
SECRET_LABEL = f"{GROUP}/cache"


def make_secrets(rest: RestClient, n: int = 200, kib: int = 32, wanted: int = 10) -> int:
    """``n`` Secrets of ``kib`` KiB each in the vault namespace; only ``wanted`` carry the label we need."""
    existing = rest.ok("GET", f"/api/v1/namespaces/{VAULT}/secrets", accept=METADATA_LIST).get("items") or []
    have = {s["metadata"]["name"] for s in existing}
    payload = base64.b64encode(os.urandom(kib * 1024)).decode()
    for i in range(n):
        name = f"credentials-{i:03d}"
        if name in have:
            continue
        labels = {SECRET_LABEL: "true"} if i < wanted else {}
        rest.ok(
            "POST",
            f"/api/v1/namespaces/{VAULT}/secrets",
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": name, "labels": labels},
                "data": {"blob": payload},
            },
        )
    return n


def compare_caches(lab: Any) -> Comparison:
    """G6: a cache of every Secret, of the labelled Secrets only, and of every Secret's metadata only."""
    rows, loads = {}, {}
    for mode in ("all", "selector", "metadata"):
        with apiload.measure(lab, "secrets") as load:
            ctl = apiload.start_metered(lab, CONTROLLERS / "secretcache.py", "--cache", mode,
                                        name=f"secretcache-{mode}")
            time.sleep(0.5)
            own = ctl.metrics()
            rss = ctl.rss()
            ctl.stop()
        loads[mode] = load
        rows[mode] = {
            "objects cached": _own(own, "controller_cache_objects"),
            "cache MiB": apiload.mib(own.total("controller_cache_bytes")),
            "LIST MiB sent (gzip)": apiload.mib(load.response_bytes(verb="LIST")),
            "memory MiB": apiload.mib(rss),
        }
    return Comparison("What a Secret cache costs", apiload.table(rows), loads)




def stale_update(rest: RestClient) -> tuple[int, str]:
    """Two actors read widget shared, both change it and PUT it back: the second PUT is refused."""
    first = rest.ok("GET", SHARED)
    second = rest.ok("GET", SHARED)  # the same resourceVersion as the first actor's copy
    first["spec"]["color"] = "red"
    rest.ok("PUT", SHARED, first)
    second["spec"]["color"] = "green"
    answer = rest.call("PUT", SHARED, second)
    return answer.status_code, message(answer)


def merge_patch_race(rest: RestClient) -> tuple[list[int], str]:
    """Two actors merge-patch spec.color of widget shared: both succeed, and the first change is lost."""
    codes = []
    for color in ("orange", "purple"):
        codes.append(rest.call("PATCH", SHARED, {"spec": {"color": color}}, content_type=MERGE).status_code)
    return codes, str(rest.ok("GET", SHARED)["spec"]["color"])


def apply_port(rest: RestClient, manager: str, name: str, port: int, dry_run: bool = False) -> Any:
    """``manager`` applies one port entry to widget shared with server-side apply."""
    params = {"fieldManager": manager}
    if dry_run:
        params["dryRun"] = "All"
    body = {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Widget",
        "metadata": {"name": "shared", "namespace": NS},
        "spec": {"ports": [{"name": name, "port": port}]},
    }
    return rest.call("PATCH", SHARED, body, content_type=SSA, params=params)


def get_shared(rest: RestClient) -> dict:
    return rest.ok("GET", SHARED)


# --------------------------------------------------------------------------- G6: the checksum controller
CHECKSUMMER = "checksummer"  # declared in lab.yaml: controllers/checksums.py
CHECKSUMS = f"/api/v1/namespaces/{VAULT}/configmaps/secret-checksums"
ROTATED = "credentials-rotated"  # a labelled Secret whose data the exercise's check changes
_LIST_BYTES: dict[int, int] = {}  # what the API server sent each checksummer (by pid) for its first list


def checksum(data: dict[str, str]) -> str:
    """The checksum the checksum controller records for a Secret's data."""
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def checksum_key(secret: dict) -> str:
    """The ConfigMap key under which the checksum controller records a Secret's checksum."""
    return f"{secret['metadata'].get('namespace')}.{secret['metadata']['name']}"


def start_checksummer(lab: Any, code: Path | None = None) -> dict[str, float]:
    """(Re)start the checksum controller, with the cache_options() saved in ``code`` when given, and
    return what its cache costs. The API server's LIST bytes are measured around the start."""
    lab.stop(CHECKSUMMER)  # a fresh start, so that its first list is measured
    with apiload.measure(lab, "secrets") as load:
        proc = lab.start(CHECKSUMMER, *(["--cache-code", str(code)] if code else []))
    _LIST_BYTES[int(proc.pid)] = load.response_bytes(verb="LIST")
    return checksummer_costs(lab)


def checksummer_metrics(lab: Any) -> tuple[int, apiload.Metrics]:
    """The running checksum controller's pid and its own metrics; KrmcourseError when it does not run."""
    pid, url = lab.running().get(CHECKSUMMER), apiload.running_metrics_url(lab, CHECKSUMMER)
    if pid is None or url is None:
        raise KrmcourseError("The checksum controller is not running.", "Start it with wc.start_checksummer(lab).")
    return pid, apiload.scrape(url)


def checksummer_costs(lab: Any) -> dict[str, float]:
    """What the running checksum controller's cache holds, and its memory (the kernel's count)."""
    pid, own = checksummer_metrics(lab)
    return {
        "objects cached": _own(own, "controller_cache_objects"),
        "cache MiB": apiload.mib(own.total("controller_cache_bytes")),
        "LIST MiB sent (gzip)": apiload.mib(_LIST_BYTES.get(pid, float("nan"))),
        "memory MiB": round(apiload.rss_mib([pid]), 1),
    }


def recorded_checksums(rest: RestClient) -> dict[str, str]:
    """The checksums in ConfigMap vault/secret-checksums, by ``<namespace>.<name>``."""
    answer = rest.call("GET", CHECKSUMS)
    return dict(answer.json().get("data") or {}) if answer.status_code == 200 else {}


def labelled_secrets(rest: RestClient) -> list[dict]:
    """Every Secret of the cluster that the checksum controller must checksum (read live, whole)."""
    found = rest.ok("GET", "/api/v1/secrets", params={"labelSelector": f"{SECRET_LABEL}=true"})
    return list(found.get("items") or [])


def unlabelled_count(rest: RestClient) -> int:
    """How many of make_secrets' Secrets without the label are in the vault namespace."""
    listed = rest.ok("GET", f"/api/v1/namespaces/{VAULT}/secrets", accept=METADATA_LIST,
                     params={"labelSelector": f"!{SECRET_LABEL}"}).get("items") or []
    return sum(1 for s in listed if s["metadata"]["name"].startswith("credentials-"))


def rotate(rest: RestClient) -> str:
    """Give the labelled Secret credentials-rotated new data (creating it), and return its checksum."""
    data = {"password": base64.b64encode(os.urandom(24)).decode()}
    body = {"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": ROTATED, "namespace": VAULT, "labels": {SECRET_LABEL: "true"}}, "data": data}
    rest.ok("PATCH", f"/api/v1/namespaces/{VAULT}/secrets/{ROTATED}", body, content_type=apiload.SSA,
            params={"fieldManager": "rotation", "force": "true"})
    return checksum(data)


def compare_checksummers(**rows: dict[str, float]) -> Comparison:
    """The checksum controller's costs side by side, one row per cache (``everything=before, ...``)."""
    return Comparison("What the checksum controller's cache costs", apiload.table(rows))
