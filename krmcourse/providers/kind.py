"""The kind provider, for learners who have Docker (or Podman): a real node container per lab.

kind needs a container engine and its node image, so it cannot run on a machine without them; the
preflight check says so plainly instead of letting ``kind`` fail half-way.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import yaml

from ..errors import ClusterError, ProviderError
from ..paths import private_file, state_dir
from .base import ClusterOptions, Provider, Say, check_port_free

NO_ENGINE_HINT = ("Start Docker (or Podman with KIND_EXPERIMENTAL_PROVIDER=podman), or use the default "
                  "provider, which needs no container engine: KRMCOURSE_PROVIDER=kwok.")


class KindProvider(Provider):
    name = "kind"

    def __init__(self, kind: str | None = None) -> None:
        self._kind = kind

    @property
    def kind(self) -> str | None:
        return self._kind or shutil.which("kind")

    def folder(self, cluster: str) -> Path:
        return state_dir() / "kind" / cluster

    def kubeconfig(self, cluster: str) -> Path:
        return self.folder(cluster) / "kubeconfig.yaml"

    def engine_problem(self) -> str | None:
        """Why no container engine answers, or None when one does."""
        if os.environ.get("KRMCOURSE_KIND_PREFLIGHT", "1") == "0":
            return None
        engine = os.environ.get("KIND_EXPERIMENTAL_PROVIDER", "docker")
        if not shutil.which(engine):
            return f"{engine} is not installed."
        try:
            done = subprocess.run([engine, "info"], capture_output=True, text=True, timeout=20)
        except subprocess.TimeoutExpired:
            return f"'{engine} info' did not answer within 20 s."
        if done.returncode != 0:
            return f"{engine} is installed but its engine is not running ('{engine} info' failed)."
        return None

    def usable(self) -> str | None:
        if not self.kind:
            return "kind is not installed (it is a single binary: see the kind quick start)."
        return self.engine_problem()

    def _run(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        assert self.kind
        return subprocess.run([self.kind, *args], capture_output=True, text=True, timeout=timeout)

    def config_document(self, options: ClusterOptions) -> dict:
        networking: dict[str, object] = {"apiServerAddress": "127.0.0.1"}
        if options.port:
            networking["apiServerPort"] = options.port
        return {"kind": "Cluster", "apiVersion": "kind.x-k8s.io/v1alpha4", "networking": networking}

    def create(self, options: ClusterOptions, say: Say) -> None:
        problem = self.usable()
        if problem:
            raise ProviderError(f"The kind provider cannot run here: {problem}", NO_ENGINE_HINT)
        if options.port:
            check_port_free(options.port)
        folder = self.folder(options.cluster)
        folder.mkdir(parents=True, exist_ok=True)
        config = folder / "kind.yaml"
        config.write_text(yaml.safe_dump(self.config_document(options)))
        # kind writes the kubeconfig itself; create it private first so it never exists world-readable.
        private_file(self.kubeconfig(options.cluster), "")
        say(f"kind is creating {options.cluster} (pulling the node image the first time can take minutes)")
        done = self._run("create", "cluster", "--name", options.cluster, "--config", str(config),
                         "--kubeconfig", str(self.kubeconfig(options.cluster)), "--wait", "120s")
        if done.returncode != 0:
            raise ClusterError(f"kind could not create {options.cluster}:\n{done.stderr.strip()[-2000:]}",
                               "Run 'kind get clusters' and 'docker ps' to see what is left, then "
                               "'krmcourse down' for this lab.")
        os.chmod(self.kubeconfig(options.cluster), 0o600)

    def delete(self, cluster: str) -> None:
        if self.kind and cluster in self.clusters():
            self._run("delete", "cluster", "--name", cluster, "--kubeconfig", str(self.kubeconfig(cluster)))
        shutil.rmtree(self.folder(cluster), ignore_errors=True)

    def clusters(self) -> list[str]:
        if not self.kind:
            return []
        done = self._run("get", "clusters", timeout=60)
        names = [line.strip() for line in done.stdout.splitlines() if line.strip()]
        return [n for n in names if n.startswith("krm-")]

    def exists(self, cluster: str) -> bool:
        return cluster in self.clusters()
