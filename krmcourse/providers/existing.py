"""The existing provider: a cluster somebody else runs, named by a kubeconfig and a context.

krmcourse copies that one context into its own private kubeconfig, so the user's file is only read,
and ``down`` removes what the lab applied rather than the cluster.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from urllib.parse import urlparse

import yaml

from ..errors import ProviderError
from ..paths import private_file, state_dir
from .base import ClusterOptions, Provider, Say


class ExistingProvider(Provider):
    name = "existing"

    def __init__(self, kubeconfig: str | None = None, context: str | None = None) -> None:
        source = kubeconfig or os.environ.get("KRMCOURSE_KUBECONFIG") or os.environ.get("KUBECONFIG")
        self.source = Path(source).expanduser() if source else Path.home() / ".kube" / "config"
        self.context = context or os.environ.get("KRMCOURSE_CONTEXT")

    def folder(self, cluster: str) -> Path:
        return state_dir() / "existing" / cluster

    def kubeconfig(self, cluster: str) -> Path:
        return self.folder(cluster) / "kubeconfig.yaml"

    def owns_clusters(self) -> bool:
        return False

    def usable(self) -> str | None:
        if not self.source.is_file():
            return f"no kubeconfig at {self.source} (set KRMCOURSE_KUBECONFIG)."
        return None

    def create(self, options: ClusterOptions, say: Say) -> None:
        problem = self.usable()
        if problem:
            raise ProviderError(f"The existing provider cannot run: {problem}",
                                "Point KRMCOURSE_KUBECONFIG at a kubeconfig, and KRMCOURSE_CONTEXT at a context.")
        config = yaml.safe_load(self.source.read_text()) or {}
        context_name = self.context or config.get("current-context")
        contexts = {c["name"]: c["context"] for c in config.get("contexts", [])}
        if context_name not in contexts:
            raise ProviderError(f"Context {context_name!r} is not in {self.source}.",
                                f"Pick one of: {', '.join(contexts) or '(none)'} with KRMCOURSE_CONTEXT.")
        ctx = contexts[context_name]
        pick = {
            "apiVersion": "v1", "kind": "Config", "current-context": context_name,
            "contexts": [{"name": context_name, "context": ctx}],
            "clusters": [c for c in config.get("clusters", []) if c["name"] == ctx.get("cluster")],
            "users": [u for u in config.get("users", []) if u["name"] == ctx.get("user")],
        }
        private_file(self.kubeconfig(options.cluster), yaml.safe_dump(pick))

    def delete(self, cluster: str) -> None:
        shutil.rmtree(self.folder(cluster), ignore_errors=True)

    def exists(self, cluster: str) -> bool:
        return self.kubeconfig(cluster).is_file()

    def clusters(self) -> list[str]:
        root = state_dir() / "existing"
        return sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []

    def host_address(self, cluster: str) -> str:
        """127.0.0.1 when the borrowed API server runs on this machine; otherwise none can be known."""
        server = yaml.safe_load(self.kubeconfig(cluster).read_text())["clusters"][0]["cluster"]["server"]
        if urlparse(server).hostname in ("127.0.0.1", "localhost", "::1"):
            return "127.0.0.1"
        raise ProviderError(f"The API server of this borrowed cluster ({server}) runs elsewhere, so it cannot call "
                            "a webhook served on this machine.",
                            "Run this lab on the kwok or kind provider, or serve the webhook inside that cluster "
                            "behind a Service (clientConfig.service).")
