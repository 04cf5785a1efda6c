"""What every cluster provider offers, so that :class:`krmcourse.Lab` does not care which one runs."""

from __future__ import annotations

import socket
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import PortInUseError

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


class Provider(ABC):
    """A way to get a Kubernetes cluster for a lab."""

    name: str

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

    def owns_clusters(self) -> bool:
        """False when the provider only borrows a cluster that someone else runs."""
        return True


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
