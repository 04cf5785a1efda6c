"""Read a kubeconfig the way any HTTP client must: which server, which CA to trust, which credentials.

Several parts of the course talk to an API server over plain HTTPS (the start-up probe, the request
counting client of Part V, the resource-model lab's raw client). They all start here, so that inline
``*-data`` fields, relative paths and tokens are handled once.

>>> conn = connection(lab.kubeconfig)                   # doctest: +SKIP
>>> httpx.Client(base_url=conn.server, verify=conn.tls, headers=conn.headers)  # doctest: +SKIP
"""

from __future__ import annotations

import base64
import os
import ssl
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .errors import KrmcourseError
from .paths import private_file


class KubeconfigError(KrmcourseError, ValueError):
    """The kubeconfig lacks what a plain HTTPS client needs, or uses credentials only kubectl understands."""


@dataclass(frozen=True)
class Connection:
    """Where one kubeconfig context points, and how to prove who we are there."""

    server: str
    tls: ssl.SSLContext
    headers: dict[str, str] = field(default_factory=dict)


#: User fields a plain client can act on; anything else (exec plugins, auth providers) needs kubectl.
UNDERSTOOD = {"client-certificate", "client-certificate-data", "client-key", "client-key-data", "token"}


def connection(kubeconfig: Path) -> Connection:
    """The server, TLS context and auth headers of ``kubeconfig``'s current context."""
    kubeconfig = Path(kubeconfig)
    config = yaml.safe_load(kubeconfig.read_text()) or {}
    contexts = {c["name"]: c["context"] for c in config.get("contexts") or []}
    current = contexts.get(config.get("current-context", "")) or next(iter(contexts.values()), None)
    if current is None:
        raise KubeconfigError(f"{kubeconfig} has no context to use.", "Point at the lab's kubeconfig: "
                              "lab.kubeconfig, or 'krmcourse env LAB'.")
    try:
        cluster = next(c["cluster"] for c in config.get("clusters") or [] if c["name"] == current["cluster"])
        user = next(u["user"] for u in config.get("users") or [] if u["name"] == current["user"])
    except StopIteration:
        raise KubeconfigError(f"{kubeconfig}: the current context names a cluster or user it does not define.",
                              "Recreate the kubeconfig (for a lab: 'krmcourse reset LAB').") from None
    if not set(user) <= UNDERSTOOD or {"tls-server-name", "proxy-url"} & set(cluster):
        raise KubeconfigError(f"{kubeconfig} uses {', '.join(sorted(set(user) - UNDERSTOOD)) or 'options'} "
                              "that only kubectl understands.", "Use lab.kubectl(...) with this cluster.")
    headers = {"Authorization": f"Bearer {user['token']}"} if user.get("token") else {}
    if not headers and not (user.get("client-certificate") or user.get("client-certificate-data")):
        raise KubeconfigError(f"{kubeconfig} has neither a token nor a client certificate for its user.",
                              "Use a kubeconfig from 'krmcourse env LAB' or lab.kubeconfig_for(...).")
    return Connection(str(cluster["server"]), _tls(cluster, user, kubeconfig.parent), headers)


#: Inline credentials a kubeconfig may carry, and the file each becomes in ``as_files``.
INLINE = {"certificate-authority": "ca.crt", "client-certificate": "client.crt", "client-key": "client.key"}


def as_files(kubeconfig: Path, folder: Path) -> None:
    """Move a kubeconfig's inline ``*-data`` credentials into files in ``folder`` (mode 0600), named by path.

    kr8s, kopf and the Kubernetes client hand TLS material to ``ssl`` as files, so each of them copies
    inline data into temporary files; kr8s does it for every client it builds, and never removes them.
    A kubeconfig that names files (as kwokctl's does) leaves nothing behind: the files live in the
    lab's state folder, which ``down`` removes."""
    kubeconfig = Path(kubeconfig)
    config = yaml.safe_load(kubeconfig.read_text()) or {}
    moved = False
    for section, inner in (("clusters", "cluster"), ("users", "user")):
        for item in config.get(section) or []:
            entry = item.get(inner) or {}
            for key, filename in INLINE.items():
                data = entry.pop(f"{key}-data", None)
                if data:
                    path = private_file(folder / f"{item['name']}-{filename}", "")
                    path.write_bytes(base64.b64decode(data))
                    entry[key] = str(path)
                    moved = True
    if moved:
        private_file(kubeconfig, yaml.safe_dump(config, sort_keys=False))


def _path(entry: dict[str, Any], key: str, base: Path) -> Path | None:
    """A certificate or key given as a path, relative to the kubeconfig's folder."""
    if entry.get(f"{key}-data") or not entry.get(key):
        return None
    path = Path(entry[key])
    return path if path.is_absolute() else base / path


def _data(entry: dict[str, Any], key: str, base: Path) -> bytes | None:
    """A certificate or key given inline (``<key>-data``) or as a path."""
    if entry.get(f"{key}-data"):
        return base64.b64decode(entry[f"{key}-data"])
    path = _path(entry, key, base)
    return path.read_bytes() if path else None


def _tls(cluster: dict[str, Any], user: dict[str, Any], base: Path) -> ssl.SSLContext:
    """Trust the cluster's CA (or the system's, when none is named) and present the client certificate."""
    ca = _data(cluster, "certificate-authority", base)
    context = ssl.create_default_context(cadata=ca.decode() if ca else None)
    if cluster.get("insecure-skip-tls-verify"):
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    cert, key = _path(user, "client-certificate", base), _path(user, "client-key", base)
    if cert and key:
        context.load_cert_chain(str(cert), str(key))
        return context
    cert_data, key_data = _data(user, "client-certificate", base), _data(user, "client-key", base)
    if cert_data and key_data:
        # ssl loads a key pair only from files: keep inline ones (mode 0600) just long enough to load them.
        with tempfile.TemporaryDirectory(prefix="krmcourse-tls-") as tmp:
            files = []
            for name, data in (("client.crt", cert_data), ("client.key", key_data)):
                path = Path(tmp) / name
                with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as fh:
                    fh.write(data)
                files.append(str(path))
            context.load_cert_chain(*files)
    return context
