"""Cheap reads of a cluster's API while it starts, straight over HTTPS with the kubeconfig's credentials.

Waiting for a cluster means asking the same few questions many times a second. Each kubectl call is a
new process that costs a tenth of a second of CPU, which on a two-core machine slows the very API server
it is waiting for. A probe asks over one Python HTTPS connection instead. It understands client
certificates and bearer tokens, which is what kwokctl and kind write; for anything else (an exec
plugin, say) :func:`for_kubeconfig` returns None and callers fall back to kubectl.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import ssl
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml


class ApiProbe:
    """Requests to one API server; any failure to connect reads as "no answer"."""

    def __init__(self, server: str, context: ssl.SSLContext, token: str | None = None) -> None:
        parts = urlsplit(server)
        if parts.scheme != "https" or not parts.hostname:
            raise ValueError(f"not an https server address: {server!r}")
        self.host, self.port = parts.hostname, parts.port or 443
        self.context = context
        self.headers = {"Accept": "application/json"}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        self._conn: http.client.HTTPSConnection | None = None

    def get(self, path: str, timeout: float = 2) -> tuple[int | None, bytes]:
        """(status, body) of ``GET path``, or (None, b"") when nothing answered."""
        return self._request("GET", path, None, timeout)

    def create(self, path: str, obj: dict[str, Any], timeout: float = 10) -> int | None:
        """POST ``obj`` to the collection at ``path``; the status (201 made, 409 already there)."""
        return self._request("POST", path, json.dumps(obj).encode(), timeout)[0]

    def _request(self, method: str, path: str, body: bytes | None, timeout: float) -> tuple[int | None, bytes]:
        headers = dict(self.headers, **({"Content-Type": "application/json"} if body is not None else {}))
        for _ in range(2):  # a kept-alive connection the server has closed fails once; retry on a new one
            if self._conn is None:
                self._conn = http.client.HTTPSConnection(self.host, self.port, context=self.context,
                                                         timeout=timeout)
            try:
                self._conn.request(method, path, body=body, headers=headers)
                resp = self._conn.getresponse()
                return resp.status, resp.read()
            except (OSError, http.client.HTTPException):
                self.close()
        return None, b""

    def get_json(self, path: str) -> dict[str, Any] | None:
        """The decoded object at ``path``, or None when it is not there (yet)."""
        status, body = self.get(path)
        return json.loads(body) if status == 200 else None

    def ready(self) -> bool:
        status, body = self.get("/readyz")
        return status == 200 and body.strip() == b"ok"

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def for_kubeconfig(path: Path) -> ApiProbe | None:
    """A probe for the current context of ``path``, or None when its credentials need kubectl."""
    config = yaml.safe_load(Path(path).read_text()) or {}
    try:
        context = _named(config, "contexts", config["current-context"])
        cluster = _named(config, "clusters", context["cluster"])
        user = _named(config, "users", context["user"])
    except (KeyError, TypeError, StopIteration):
        return None
    if (not str(cluster.get("server", "")).startswith("https://") or not set(user) <= _UNDERSTOOD
            or "tls-server-name" in cluster or "proxy-url" in cluster):
        return None
    ssl_context = ssl.create_default_context()
    if cluster.get("insecure-skip-tls-verify"):
        ssl_context.check_hostname = False
        ssl_context.verify_mode = ssl.CERT_NONE
    elif "certificate-authority-data" in cluster:
        ssl_context.load_verify_locations(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
    elif "certificate-authority" in cluster:
        ssl_context.load_verify_locations(cafile=cluster["certificate-authority"])
    with tempfile.TemporaryDirectory(prefix="krmcourse-probe-") as private:
        cert = _file(user, "client-certificate", Path(private) / "client.crt")
        key = _file(user, "client-key", Path(private) / "client.key")
        if cert and key:
            ssl_context.load_cert_chain(cert, key)
    return ApiProbe(cluster["server"], ssl_context, token=user.get("token"))


_UNDERSTOOD = {"client-certificate", "client-certificate-data", "client-key", "client-key-data", "token"}


def _named(config: dict[str, Any], section: str, name: str) -> dict[str, Any]:
    entry = next(e for e in config[section] if e["name"] == name)
    return entry[section[:-1]]


def _file(user: dict[str, Any], field: str, spill: Path) -> str | None:
    """The path holding ``field``: its own path, or the inline data written to ``spill`` (mode 0600)."""
    if field in user:
        return str(user[field])
    if f"{field}-data" in user:
        fd = os.open(spill, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(base64.b64decode(user[f"{field}-data"]))
        return str(spill)
    return None
