"""The user image: the course as a JupyterHub single-user server, for a hub on Kubernetes (z2jh).

A room that outgrows one machine runs the course on Zero to JupyterHub, whose KubeSpawner starts one
pod per learner from a user image. :func:`build` makes that image here with ``docker build``, from
nothing but this machine's files, since no image registry can be reached:

1. **base** (``krmcourse/user-base``): a Debian root file system from debootstrap, with Python, tini
   and CA certificates, made into an image with ``docker import``, as the kind node image's base is;
2. **venv** (``krmcourse/user-venv``): the course's Python packages, JupyterLab and JupyterHub's
   single-user server, installed from the wheelhouse that ``krmcourse hub prepare`` fills (a build
   container reaches no package registry), named for the wheels: a change to the course alone reuses it;
3. **user** (``krmcourse/user``): the base, that venv, the course installed into it, and the lab control plane
   prebuilt (the toolchain's binaries, as :mod:`krmcourse.toolchain` built them), run as uid 1000
   with ``jupyterhub-singleuser`` under tini, as KubeSpawner expects.

The build context is staged from the repository, the wheelhouse and the toolchain, and every tag is
named for the digest of what went in, so an unchanged course is never built twice. The z2jh values
that run the image are ``deploy/z2jh/values.yaml``; :func:`run_options` reads the same file into
``docker run`` options, so that a test runs the image as the hub would.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from . import hub, pins, toolchain
from .errors import ProviderError, ToolchainError, UsageError
from .nodeimage import Say, debootstrap, docker, image_exists, import_folder, older_tags, remove_tree, timed
from .paths import cache_dir, file_lock

#: Debian packages of the image: Python and its venv module, tini (PID 1, reaping the lab's processes
#: when they exit), CA certificates, and procps (ps and top, for a learner's terminal).
PACKAGES = ("python3", "python3-venv", "ca-certificates", "tini", "procps")
#: Bump when the base recipe changes, so that a base made by the old recipe is not reused.
RECIPE = 1
#: The account the server runs as: uid 1000 in group 100, z2jh's defaults (``singleuser.uid``, ``fsGid``).
USER, UID, GID = "jovyan", 1000, 100
PREFIX = "/opt/krmcourse"
#: The z2jh values that run the image, in the repository.
VALUES = Path("deploy") / "z2jh" / "values.yaml"
START_ENGINE = "bash .ci/docker/start-engine"
HINT = (f"Start Docker's engine ('{START_ENGINE}' in the repository installs and starts Debian's), check that "
        "'docker info' answers, then run 'krmcourse image build' again (what is made is kept).")

#: The course's Python packages in a venv, from the staged wheelhouse (no package registry is reached):
#: an image of its own, named for the wheels and the requirements, so that a change to the course alone
#: does not copy the venv into a new layer.
VENV_DOCKERFILE = """\
# The Python packages of the course's user image, written by krmcourse/userimage.py.
FROM {base}
COPY wheelhouse /tmp/wheelhouse
RUN python3 -m venv {prefix}/venv \\
 && {prefix}/venv/bin/pip install --quiet --no-cache-dir --no-index --find-links /tmp/wheelhouse \\
        -r /tmp/wheelhouse/requirements.txt \\
 && rm -rf /tmp/wheelhouse
"""

DOCKERFILE = """\
# The course's user image for a Kubernetes-hosted JupyterHub, written by krmcourse/userimage.py.
FROM {base}
RUN useradd --uid {uid} --gid {gid} --no-user-group --create-home --shell /bin/bash {user}
COPY toolchain {prefix}/cache/toolchain
COPY --from={venv} {prefix}/venv {prefix}/venv
COPY course {prefix}/course
RUN {prefix}/venv/bin/pip install --quiet --no-cache-dir --no-index --no-build-isolation --no-deps \\
        -e {prefix}/course \\
 && {prefix}/venv/bin/python -c "from krmcourse.jupyter import install_settings; install_settings()"
ENV LANG=C.UTF-8 \\
    SHELL=/bin/bash \\
    HOME=/home/{user} \\
    PATH={prefix}/venv/bin:/usr/local/bin:/usr/bin:/bin \\
    KRMCOURSE_CACHE={prefix}/cache
USER {uid}:{gid}
WORKDIR /home/{user}
EXPOSE 8888
ENTRYPOINT ["tini", "-g", "--"]
CMD ["jupyterhub-singleuser"]
LABEL krmcourse.kubernetes={kubernetes}
"""


def _digest(parts: Iterable[str | bytes]) -> str:
    sha = hashlib.sha256()
    for part in parts:
        sha.update(part if isinstance(part, bytes) else part.encode())
        sha.update(b"\0")
    return sha.hexdigest()[:12]


def base_tag() -> str:
    return f"krmcourse/user-base:{pins.DEBIAN}-" + _digest([*PACKAGES, str(RECIPE)])


def venv_dockerfile() -> str:
    return VENV_DOCKERFILE.format(base=base_tag(), prefix=PREFIX)


def venv_tag(wheels: list[tuple[Path, Path]]) -> str:
    """Named for the base, the requirements and each wheel's bytes."""
    return "krmcourse/user-venv:py-" + _digest([venv_dockerfile(), _requirements(), *_hashed(wheels)])


def dockerfile(venv: str) -> str:
    return DOCKERFILE.format(base=base_tag(), venv=venv, prefix=PREFIX, uid=UID, gid=GID, user=USER,
                             kubernetes=pins.KUBERNETES)


# ----------------------------------------------------------------- what goes in
def _course_files() -> list[tuple[Path, Path]]:
    """(source, path in the context) of every course file the image holds: the package, labs, notebooks."""
    files = []
    for name in hub.COURSE_FILES:
        top = hub.repository() / name
        for path in sorted(top.rglob("*")) if top.is_dir() else [top]:
            if path.is_file() and not _ignored(path.relative_to(hub.repository())):
                files.append((path, Path("course") / path.relative_to(hub.repository())))
    return files


def _ignored(relative: Path) -> bool:
    return any(part in ("__pycache__", ".ipynb_checkpoints", "build") or part.endswith((".pyc", ".egg-info"))
               for part in relative.parts)


def _wheel_files() -> list[tuple[Path, Path]]:
    wheels = sorted(hub.wheelhouse().glob("*.whl"))
    if not wheels or not (hub.wheelhouse() / ".requirements").is_file():
        raise ToolchainError(f"The wheelhouse {hub.wheelhouse()} is empty; the image installs its Python packages "
                             "from it.", "Run 'krmcourse hub prepare' (./course install does it, as root) while "
                                         "PyPI is reachable, then 'krmcourse image build' again.")
    filled_for = set((hub.wheelhouse() / ".requirements").read_text().splitlines()[1:])
    if missing := [r for r in hub.requirements() if r not in filled_for]:
        raise ToolchainError(f"The wheelhouse {hub.wheelhouse()} was not filled for {', '.join(missing)}, which "
                             "the course needs now.", "Run 'krmcourse hub prepare' again while PyPI is reachable, then "
                                              "'krmcourse image build'.")
    return [(w, Path("wheelhouse") / w.name) for w in wheels]


def _toolchain_files() -> list[tuple[Path, Path]]:
    missing = toolchain.missing("kwok")
    if missing:
        raise ToolchainError(f"The image holds the lab control plane, and it is not built: {', '.join(missing)}.",
                             "Run 'krmcourse toolchain install' (./course install does it), then "
                             "'krmcourse image build' again.")
    files = []
    for component in toolchain.COMPONENTS:
        for path in sorted(component.folder.rglob("*")):
            if path.is_file():
                files.append((path, Path("toolchain") / component.folder.name / path.relative_to(component.folder)))
    return files


def _requirements() -> str:
    return "\n".join(hub.requirements()) + "\n"


def _hashed(files: list[tuple[Path, Path]]) -> list[str]:
    """Each file's path in the context, mode and the sha256 of its bytes."""
    return [f"{inside} {'755' if os.access(source, os.X_OK) else '644'} "
            f"{hashlib.sha256(source.read_bytes()).hexdigest()}" for source, inside in files]


def image_tag(venv: str | None = None, files: list[tuple[Path, Path]] | None = None) -> str:
    """Named for the Kubernetes version and the digest of the Dockerfile (which names the venv image)
    and of every file of the context: the course, the toolchain."""
    venv = venv or venv_tag(_wheel_files())
    files = files if files is not None else [*_toolchain_files(), *_course_files()]
    return f"krmcourse/user:{pins.KUBERNETES}-" + _digest([dockerfile(venv), *_hashed(files)])


def stage(folder: Path, files: list[tuple[Path, Path]], dockerfile: str) -> Path:
    """Write a build context into ``folder`` (made afresh): hard links where the file system allows."""
    remove_tree(folder)
    folder.mkdir(parents=True)
    for source, inside in files:
        target = folder / inside
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(source, target)
        except OSError:
            shutil.copy2(source, target)
    if (folder / "wheelhouse").is_dir():
        (folder / "wheelhouse" / "requirements.txt").write_text(_requirements())
    (folder / "Dockerfile").write_text(dockerfile)
    return folder


# ----------------------------------------------------------------- the build
def require_engine() -> None:
    """Docker's engine answers, or an error that says how to start it."""
    if docker("info", check=False, timeout=60, hint=HINT).returncode != 0:
        raise ProviderError("Docker is installed but its engine does not answer ('docker info' failed).", HINT)


def build(say: Say = print, force: bool = False) -> str:
    """Make the user image unless an image of the same content is there; its tag. Each phase is timed."""
    require_engine()
    wheels, files = _wheel_files(), [*_toolchain_files(), *_course_files()]
    venv = venv_tag(wheels)
    tag = image_tag(venv, files)
    if image_exists(tag) and not force:
        say(f"  user image {tag} is already there")
        return tag
    context = cache_dir() / "user-image" / "context"
    with file_lock(cache_dir() / "user-image" / "build.lock",
                   waiting=lambda: say("  waiting for another build of the user image to finish")):
        if image_exists(tag) and not force:  # the other build made it
            return tag
        _build(tag, venv, wheels, files, context, force, say)
    say(f"  user image {tag} is ready ({image_size(tag) / 2**20:.0f} MiB)")
    return tag


def _build(tag: str, venv: str, wheels: list[tuple[Path, Path]], files: list[tuple[Path, Path]], context: Path,
           force: bool, say: Say) -> None:
    try:
        with timed("user base image", say):
            if force or not image_exists(base_tag()):
                with debootstrap(PACKAGES, "the user image", say) as root:
                    _trim(root)
                    say("  importing the base image")
                    import_folder(root, base_tag(), ["ENV LANG=C.UTF-8", 'CMD ["/bin/bash"]'])
        with timed("user image venv", say):
            if force or not image_exists(venv):
                _docker_build(stage(context, wheels, venv_dockerfile()), venv, force)
        with timed("user image", say):
            _docker_build(stage(context, files, dockerfile(venv)), tag, force)
    finally:
        remove_tree(context)
    for repository, current in (("krmcourse/user", tag), ("krmcourse/user-venv", venv),
                                ("krmcourse/user-base", base_tag())):
        for stale in older_tags(repository, current):
            docker("rmi", stale, check=False, hint=HINT)


def _trim(root: Path) -> None:
    """What an image needs no copy of: apt's lists and caches, documentation, manual pages, locales."""
    for folder in ("var/lib/apt/lists", "var/cache/apt", "usr/share/doc", "usr/share/man", "usr/share/locale"):
        for path in (root / folder).glob("*"):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()


def _docker_build(context: Path, tag: str, force: bool) -> None:
    # The classic builder: the engine here has no buildx; it caches each step by its instruction and the
    # checksums of the files it copies.
    started = time.monotonic()
    cache = ["--no-cache"] if force else []
    done = subprocess.run(["docker", "build", "--quiet", *cache, "-t", tag, str(context)], capture_output=True,
                          env={**os.environ, "DOCKER_BUILDKIT": "0"}, timeout=3600)
    if done.returncode != 0:
        raise ToolchainError(f"docker build of {tag} failed after {time.monotonic() - started:.0f} s:\n"
                             f"{done.stderr.decode(errors='replace')[-2500:]}", HINT)


def image_size(tag: str) -> int:
    return int(docker("image", "inspect", "--format", "{{.Size}}", tag, hint=HINT).stdout.decode().strip())


# ----------------------------------------------------------------- the z2jh values
def values_file() -> Path:
    return hub.repository() / VALUES


def values(path: Path | None = None) -> dict[str, Any]:
    loaded = yaml.safe_load((path or values_file()).read_text())
    if not isinstance(loaded, dict):
        raise UsageError(f"{path or values_file()} is not a YAML mapping.", "Restore it from the repository.")
    return loaded


#: KubeSpawner's units (JupyterHub's ByteSpecification): K, M, G and T are powers of 1024.
UNITS = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def memory_bytes(spec: int | float | str) -> int:
    """A z2jh memory figure (``singleuser.memory.limit``) in bytes, read as KubeSpawner reads it."""
    if isinstance(spec, int | float):
        return int(spec)
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT])\s*", spec)
    if not match:
        raise UsageError(f"{spec!r} is not a memory figure KubeSpawner reads.", "Write it as a number and one of "
                         "K, M, G, T (powers of 1024), for example 1536M.")
    return int(float(match[1]) * UNITS[match[2]])


def security_context(config: dict[str, Any]) -> dict[str, Any]:
    context = config.get("hub", {}).get("config", {}).get("KubeSpawner", {}).get("container_security_context")
    return context if isinstance(context, dict) else {}


def run_options(config: dict[str, Any]) -> list[str]:
    """``docker run`` options that give a container what the values give a learner's pod: the user and
    group, the capabilities, privilege escalation, and the memory limit (no swap, as on Kubernetes)."""
    single = config["singleuser"]
    context = security_context(config)
    options = ["--user", f"{context.get('runAsUser', single.get('uid', UID))}:"
                         f"{context.get('runAsGroup', single.get('fsGid', GID))}"]
    capabilities = context.get("capabilities", {})
    options += [f"--cap-drop={c}" for c in capabilities.get("drop", [])]
    options += [f"--cap-add={c}" for c in capabilities.get("add", [])]
    if single.get("allowPrivilegeEscalation") is False and context.get("allowPrivilegeEscalation", False) is False:
        options += ["--security-opt", "no-new-privileges"]
    if context.get("privileged"):
        options.append("--privileged")
    limit = (single.get("memory") or {}).get("limit")
    if limit is not None:
        options += [f"--memory={memory_bytes(limit)}", f"--memory-swap={memory_bytes(limit)}"]
    return options
