"""Build the lab control plane from Go modules, offline from anything but the Go module proxy.

No prebuilt Kubernetes binaries are downloaded: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, kwok and kwokctl are compiled from source at the versions pinned in
:mod:`krmcourse.pins`, into a per-user cache keyed by version. A component is built once; a later
``install`` finds its stamp file and skips it.

``k8s.io/kubernetes`` cannot be built with a plain ``go install``: its go.mod points every
``k8s.io/*`` staging module at ``./staging``. So we write a small wrapper module that requires it and
replaces each staging module with its published ``v0.Y.Z`` twin, read from that version's own go.mod.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from . import pins
from .errors import ToolchainError
from .paths import cache_dir

Say = Callable[[str], None]

GO_HINT = (
    "Install Go {need} or newer (your package manager's 'golang' package, or the official tarball), "
    "make sure 'go' is on PATH, then run 'krmcourse toolchain install' again. If you have Docker, "
    "you can skip the build and use kind instead: KRMCOURSE_PROVIDER=kind."
)


@dataclass(frozen=True)
class Component:
    """One cached build: a folder named for the component and its version."""

    name: str
    version: str
    commands: tuple[str, ...]

    @property
    def folder(self) -> Path:
        return cache_dir() / "toolchain" / f"{self.name}-{self.version}"

    def binary(self, command: str) -> Path:
        return self.folder / command

    @property
    def built(self) -> bool:
        stamp = self.folder / ".built"
        return stamp.is_file() and all(os.access(self.binary(c), os.X_OK) for c in self.commands)


KUBERNETES = Component("kubernetes", pins.KUBERNETES, pins.KUBERNETES_COMMANDS)
ETCD = Component("etcd", pins.ETCD, ("etcd",))
KWOK = Component("kwok", pins.KWOK, pins.KWOK_COMMANDS)
COMPONENTS = (ETCD, KWOK, KUBERNETES)


def binary(command: str) -> Path:
    """The cached path of one command, e.g. ``binary("kube-apiserver")``."""
    for component in COMPONENTS:
        if command in component.commands:
            return component.binary(command)
    raise KeyError(command)


def is_installed() -> bool:
    return all(c.built for c in COMPONENTS)


def missing() -> list[str]:
    return [f"{c.name} {c.version}" for c in COMPONENTS if not c.built]


def go_version(go: str | None = None) -> tuple[int, int] | None:
    """The (major, minor) of the Go on PATH, or None when there is none."""
    go = go or shutil.which("go")
    if not go:
        return None
    try:
        out = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r"go(\d+)\.(\d+)", out)
    return (int(match[1]), int(match[2])) if match else None


def require_go() -> str:
    """Return the path of a usable ``go``, or raise a ToolchainError that says what to install."""
    need = ".".join(map(str, pins.GO_MINIMUM))
    go = shutil.which("go")
    if not go:
        raise ToolchainError("Go is not installed, and the lab toolchain is built from Go modules.",
                             GO_HINT.format(need=need))
    found = go_version(go)
    if found is None or found < pins.GO_MINIMUM:
        have = ".".join(map(str, found)) if found else "an unknown version"
        raise ToolchainError(f"Go {have} is too old to build Kubernetes {pins.KUBERNETES}.",
                             GO_HINT.format(need=need))
    return go


def _go_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    # A static build with no cgo, and never a silent toolchain download.
    env.update(CGO_ENABLED="0", GOTOOLCHAIN="local", GOFLAGS="-buildvcs=false", **extra)
    return env


def _run_go(go: str, args: list[str], cwd: Path, say: Say, label: str, **env: str) -> None:
    """Run a go command, printing a heartbeat with the number of packages compiled so far."""
    started = time.monotonic()
    proc = subprocess.Popen([go, *args], cwd=cwd, env=_go_env(**env), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    done = threading.Event()

    def heartbeat() -> None:
        while not done.wait(30):
            say(f"  ... {label}: {int(time.monotonic() - started)} s, {len(lines)} packages so far")

    ticker = threading.Thread(target=heartbeat, daemon=True)
    ticker.start()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip())
        code = proc.wait()
    except KeyboardInterrupt:
        proc.kill()
        proc.wait()
        raise
    finally:
        done.set()
    if code != 0:
        tail = "\n".join(lines[-25:])
        raise ToolchainError(f"'go {' '.join(args[:2])}' failed for {label} (exit {code}):\n{tail}",
                             "Check that the Go module proxy is reachable (GOPROXY), then run "
                             "'krmcourse toolchain install' again; finished components are kept.")


def _download_gomod(go: str, module: str, version: str, cwd: Path) -> str:
    out = subprocess.run([go, "mod", "download", "-json", f"{module}@{version}"], cwd=cwd,
                         env=_go_env(), capture_output=True, text=True)
    if out.returncode != 0:
        raise ToolchainError(f"Could not fetch {module}@{version}: {out.stdout or out.stderr}",
                             "Check that the Go module proxy is reachable (GOPROXY).")
    return Path(json.loads(out.stdout)["GoMod"]).read_text()


def staging_modules(kubernetes_gomod: str) -> list[str]:
    """The ``k8s.io/*`` modules that Kubernetes' go.mod replaces with a ``./staging`` folder."""
    return sorted(set(re.findall(r"^\s*(k8s\.io/[\w.-]+)\s+=>\s+\./staging/", kubernetes_gomod, re.M)))


def wrapper_gomod(version: str, staging: list[str]) -> str:
    """go.mod of the wrapper module: Kubernetes itself, each staging module at v0.Y.Z."""
    minor = version.split(".", 1)[1]  # "v1.36.3" -> "36.3"
    replaces = "\n".join(f"\t{m} => {m} v0.{minor}" for m in staging)
    return (f"module krmcourse.local/kubernetes\n\ngo 1.26.0\n\nrequire k8s.io/kubernetes {version}\n\n"
            f"replace (\n{replaces}\n)\n")


def _wrapper_imports(packages: list[str]) -> str:
    imports = "\n".join(f'\t_ "{p}"' for p in packages)
    return f"//go:build tools\n\npackage tools\n\nimport (\n{imports}\n)\n"


def version_ldflags(version: str) -> str:
    major, minor = version.lstrip("v").split(".")[:2]
    pkg = "k8s.io/component-base/version"
    return (f"-s -w -X {pkg}.gitVersion={version} -X {pkg}.gitMajor={major} -X {pkg}.gitMinor={minor}"
            f" -X {pkg}.gitTreeState=clean")


def _build_into(component: Component, say: Say, build: Callable[[str, Path, Path], None]) -> None:
    """Build into a temporary folder, then move it into place, so a failed build leaves nothing."""
    go = require_go()
    root = cache_dir() / "toolchain"
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{component.name}-", dir=root) as tmp:
        work, out = Path(tmp) / "src", Path(tmp) / "bin"
        work.mkdir()
        out.mkdir()
        build(go, work, out)
        (out / ".built").write_text(json.dumps({"version": component.version,
                                                "go": ".".join(map(str, go_version(go) or ()))}))
        if component.folder.exists():
            shutil.rmtree(component.folder)
        out.rename(component.folder)


def _build_kubernetes(go: str, work: Path, out: Path, say: Say) -> None:
    version = KUBERNETES.version
    (work / "go.mod").write_text("module krmcourse.local/probe\n\ngo 1.26.0\n")
    staging = staging_modules(_download_gomod(go, "k8s.io/kubernetes", version, work))
    if not staging:
        raise ToolchainError(f"Found no staging modules in the go.mod of Kubernetes {version}.",
                             "The pin in krmcourse/pins.py may be wrong.")
    packages = [f"k8s.io/kubernetes/cmd/{c}" for c in KUBERNETES.commands]
    (work / "go.mod").write_text(wrapper_gomod(version, staging))
    (work / "tools.go").write_text(_wrapper_imports(packages))
    say(f"  resolving the modules of Kubernetes {version} ({len(staging)} staging modules)")
    _run_go(go, ["mod", "tidy"], work, say, "go mod tidy")
    _run_go(go, ["build", "-v", "-trimpath", "-ldflags", version_ldflags(version), "-o", str(out) + "/",
                 *packages], work, say, "Kubernetes")


def _build_etcd(go: str, work: Path, out: Path, say: Say) -> None:
    module = "go.etcd.io/etcd/server/v3"
    (work / "go.mod").write_text(f"module krmcourse.local/etcd\n\ngo 1.26.0\n\nrequire {module} {ETCD.version}\n")
    (work / "tools.go").write_text(_wrapper_imports([module]))
    _run_go(go, ["mod", "tidy"], work, say, "go mod tidy")
    _run_go(go, ["build", "-v", "-trimpath", "-ldflags", "-s -w", "-o", str(out / "etcd"), module],
            work, say, "etcd")


def _build_kwok(go: str, work: Path, out: Path, say: Say) -> None:
    targets = [f"sigs.k8s.io/kwok/cmd/{c}@{KWOK.version}" for c in KWOK.commands]
    _run_go(go, ["install", "-v", "-trimpath", "-ldflags", "-s -w", *targets], work, say, "kwok",
            GOBIN=str(out))


BUILDERS: dict[str, Callable[[str, Path, Path, Say], None]] = {
    "kubernetes": _build_kubernetes,
    "etcd": _build_etcd,
    "kwok": _build_kwok,
}

COLD_BUILD_NOTE = (
    "A cold build downloads the Go modules and compiles Kubernetes from source. On an idle 2-core "
    "machine it took about 8 minutes and up to 2 GiB of memory in one process "
    "(benchmarks/toolchain_build.py); a busy machine takes longer. It happens once; later runs reuse "
    "the cache in {cache}."
)


def install(say: Say = print, force: bool = False) -> list[Path]:
    """Build every component that is not already built at its pinned version. Idempotent."""
    todo = [c for c in COMPONENTS if force or not c.built]
    if not todo:
        say(f"Toolchain is up to date in {cache_dir() / 'toolchain'}.")
        return [c.folder for c in COMPONENTS]
    require_go()
    if KUBERNETES in todo:
        say(COLD_BUILD_NOTE.format(cache=cache_dir() / "toolchain"))
    for step, component in enumerate(todo, 1):
        started = time.monotonic()
        say(f"[{step}/{len(todo)}] building {component.name} {component.version}: "
            f"{', '.join(component.commands)}")
        _build_into(component, say, lambda go, w, o, c=component: BUILDERS[c.name](go, w, o, say))
        say(f"[{step}/{len(todo)}] {component.name} {component.version} built in "
            f"{time.monotonic() - started:.0f} s")
    for component in COMPONENTS:
        for command in component.commands:
            say(f"  {command}: {component.binary(command)}")
    return [c.folder for c in COMPONENTS]


def describe() -> list[tuple[str, str, bool, Path]]:
    """(component, version, built, folder) for each component, for ``status`` and ``doctor``."""
    return [(c.name, c.version, c.built, c.folder) for c in COMPONENTS]


if __name__ == "__main__":  # pragma: no cover
    install(lambda s: print(s, flush=True), force="--force" in sys.argv)
