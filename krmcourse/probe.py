"""Cheap reads of a cluster's API while it starts, over one HTTPS connection.

Waiting for a cluster means asking the same few questions many times a second. Each kubectl call is a
new process that costs about a tenth of a second of CPU, which on a two-core machine slows the very
API server it waits for. A probe keeps one connection open instead, with the kubeconfig's own
credentials. When those need kubectl (an exec plugin, say), :func:`for_kubeconfig` returns None and
callers fall back to kubectl.
"""

from __future__ import annotations

import json
import ssl
from pathlib import Path
from typing import Any

import httpx
import yaml

from .credentials import KubeconfigError, connection


class ApiProbe:
    """Requests to one API server; a server that does not answer (yet) reads as ``(None, b"")``."""

    def __init__(self, server: str, tls: ssl.SSLContext, headers: dict[str, str], timeout: float = 2) -> None:
        self.headers = {**headers, "Accept": "application/json"}
        self.http = httpx.Client(base_url=server, verify=tls, headers=self.headers, timeout=timeout)

    def get(self, path: str, accept: str | None = None) -> tuple[int | None, bytes]:
        return self._request("GET", path, headers={"Accept": accept} if accept else None)

    def get_fresh(self, path: str, accept: str, etag: str) -> tuple[int | None, bytes, str]:
        """GET ``path`` unless it still has ``etag``: ``(304, b"", etag)`` then, else the answer and its ETag."""
        try:
            response = self.http.get(path, headers={"Accept": accept, **({"If-None-Match": etag} if etag else {})})
        except httpx.HTTPError:
            return None, b"", ""
        return response.status_code, response.content, response.headers.get("ETag", "")

    def get_json(self, path: str) -> dict[str, Any] | None:
        """The decoded object at ``path``, or None when it is not there (yet)."""
        status, body = self.get(path)
        return json.loads(body) if status == 200 else None

    def create(self, path: str, obj: dict[str, Any]) -> int | None:
        """POST ``obj`` to the collection at ``path``; the status (201 made, 409 already there)."""
        return self._request("POST", path, obj)[0]

    def ready(self) -> bool:
        status, body = self.get("/readyz")
        return status == 200 and body.strip() == b"ok"

    def close(self) -> None:
        self.http.close()

    def _request(self, method: str, path: str, obj: dict[str, Any] | None = None,
                 headers: dict[str, str] | None = None) -> tuple[int | None, bytes]:
        try:
            response = self.http.request(method, path, json=obj, headers=headers)
        except httpx.HTTPError:
            return None, b""
        return response.status_code, response.content


def for_kubeconfig(path: Path) -> ApiProbe | None:
    """A probe for the current context of ``path``, or None when its credentials need kubectl."""
    try:
        conn = connection(path)
    except (KubeconfigError, OSError, yaml.YAMLError):
        return None
    return ApiProbe(conn.server, conn.tls, conn.headers)
