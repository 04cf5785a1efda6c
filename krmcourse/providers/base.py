"""What every cluster provider offers, so that :class:`krmcourse.Lab` does not care which one runs."""

from __future__ import annotations

import base64
import socket
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import CapabilityError, PortInUseError

Say = Callable[[str], None]


@dataclass
class ClusterOptions:
    """How one lab cluster should be started."""

    cluster: str
    port: int | None = None
    audit: bool = True
    stages: list[Path] = field(default_factory=list)
    apiserver_args: dict[str, str] = field(default_factory=dict)
    #: Filled by the provider: the ports it chose for the cluster's components.
    ports: list[int] = field(default_factory=list)


#: What a provider may be able to do beyond creating and deleting clusters, by name.
#: - ``simulated-nodes``: kwok runs beside the cluster and looks after Nodes annotated for it;
#: - ``etcd``: read keys straight from the cluster's etcd;
#: - ``control-plane-flags``: show kube-apiserver's command line;
#: - ``audit-log``: the API server writes an audit log that krmcourse can read;
#: - ``restart-components``: kill a control-plane component and have it started again.
CAPABILITIES = ("simulated-nodes", "etcd", "control-plane-flags", "audit-log", "restart-components")


class Provider(ABC):
    """A way to get a Kubernetes cluster for a lab."""

    name: str
    #: The names from CAPABILITIES that this provider offers.
    capabilities: frozenset[str] = frozenset()

    @abstractmethod
    def usable(self) -> str | None:
        """None when this provider can serve here, otherwise the reason it cannot."""

    @abstractmethod
    def create(self, options: ClusterOptions, say: Say) -> None: ...

    @abstractmethod
    def delete(self, cluster: str) -> None: ...

    @abstractmethod
    def exists(self, cluster: str) -> bool: ...

    @abstractmethod
    def clusters(self) -> list[str]: ...

    @abstractmethod
    def kubeconfig(self, cluster: str) -> Path: ...

    def health(self, cluster: str) -> dict[str, bool]:
        """Component name -> running. Providers that cannot see processes report nothing."""
        return {}

    def pids(self, cluster: str) -> dict[str, int]:
        return {}

    def restart_stopped(self, cluster: str) -> list[str]:
        """Start again the components that stopped; their names. Providers without processes do nothing."""
        return []

    def audit_log(self, cluster: str) -> Path | None:
        return None

    def restart_component(self, cluster: str, component: str, meanwhile: Callable[[], None] | None = None) -> None:
        """Stop a control-plane component (``kube-apiserver``, ``kube-controller-manager``...), call
        ``meanwhile`` while it is down, and start it again: the fault harness's API server restart, and a
        snapshot restore, which writes etcd while no kube-controller-manager can act on half of it.

        Returns once it was started again, not once it serves: the caller waits for that."""
        self.require("restart-components", f"restart {component}")

    def owns_clusters(self) -> bool:
        """False when the provider only borrows a cluster that someone else runs."""
        return True

    def can(self, capability: str) -> bool:
        return capability in self.capabilities

    def require(self, capability: str, what: str) -> None:
        """Raise CapabilityError, naming this provider, unless it offers ``capability``."""
        if capability not in self.capabilities:
            raise CapabilityError(self.name, capability, what)

    def host_address(self, cluster: str) -> str:
        """The address of this machine as the cluster's API server sees it, for webhooks served here.

        A server meant for the API server listens there (never on 0.0.0.0), and a TLS certificate for
        it names this address.
        """
        return "127.0.0.1"

    def apiserver_flags(self, cluster: str) -> dict[str, str]:
        """kube-apiserver's ``--flag=value`` arguments."""
        self.require("control-plane-flags", "show kube-apiserver's command line")
        return {}

    def etcd_call(self, cluster: str, call: str, body: dict[str, Any]) -> dict[str, Any]:
        """etcd's JSON answer to one of its gRPC-gateway calls (``kv/range``, ``kv/txn``), asked directly."""
        self.require("etcd", "read etcd directly")
        return {}

    def etcd_range(self, cluster: str, key: str, prefix: bool = False) -> list[dict[str, Any]]:
        """etcd's answer to a range request for one key, or every key under ``key`` (its ``kvs``, base64
        as etcd sends them)."""
        return list(self.etcd_call(cluster, "kv/range", range_request(key, prefix)).get("kvs") or [])


def b64(text: str | bytes) -> str:
    return base64.b64encode(text.encode() if isinstance(text, str) else text).decode()


def range_request(key: str, prefix: bool = False) -> dict[str, str]:
    """The JSON body of etcd's gRPC-gateway ``/v3/kv/range`` call for one key, or for all under it."""
    body = {"key": b64(key)}
    if prefix:  # etcd's range end for a prefix: the key with its last byte one higher
        raw = key.encode()
        body["range_end"] = b64(raw[:-1] + bytes([raw[-1] + 1]))
    return body


#: etcd settings every lab cluster gets. Its request limits stay etcd's own (128 operations and 1.5 MiB
#: in one request): the anti-patterns lab measures them.
ETCD_ARGS = {"unsafe-no-fsync": "true"}  # a lab's data is disposable


def flags_of(argv: list[str]) -> dict[str, str]:
    """``--name=value`` arguments of a command line, as a dict."""
    flags = {}
    for arg in argv[1:]:
        if arg.startswith("--") and "=" in arg:
            name, value = arg[2:].split("=", 1)
            flags[name] = value
    return flags


def check_port_free(port: int, host: str = "127.0.0.1") -> None:
    """Raise PortInUseError, naming the port, when something already listens there."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise PortInUseError(
                f"Port {port} on {host} is already in use, so the lab's API server cannot listen there.",
                "Stop whatever uses it (see 'ss -ltnp'), or pick another port with --port, or leave "
                "--port out to let krmcourse choose a free one.") from exc
