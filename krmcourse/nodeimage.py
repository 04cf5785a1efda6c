"""The kind node image, made on this machine from Debian's packages and Go modules alone.

kind's published node image comes from an image registry. Where none can be reached (CI, an offline
room), :func:`build` makes an equivalent one the way kind's own ``images/base`` and node-image builder
do, with nothing pulled:

1. **base**: a Debian root file system from debootstrap, kind's own files (entrypoint, systemd units,
   containerd configuration, read from the ``sigs.k8s.io/kind`` module), containerd, runc and the CNI
   plugins; ``docker import`` makes it an image;
2. **images**: kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy, etcd, CoreDNS and
   pause, each built from source by :mod:`krmcourse.toolchain` and named exactly as kubeadm (and kind's
   containerd configuration, for pause) asks for them, so nothing is ever pulled;
3. **node**: the base plus kubelet, kubeadm and kubectl, with those images preloaded into its
   containerd, committed as ``krmcourse/kind-node``.

A learner with internet access can skip all this: ``KRMCOURSE_KIND_IMAGE=published`` lets kind use the
node image it pins by digest, and any other value names an image to use as it is.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from . import pins, toolchain
from .errors import ProviderError, ToolchainError
from .paths import cache_dir

Say = Callable[[str], None]

#: Debian packages of the node, as kind's base image lists them, less what only storage tests use.
PACKAGES = ("systemd", "systemd-sysv", "dbus", "conntrack", "iptables", "nftables", "iproute2", "ethtool",
            "util-linux", "mount", "kmod", "libseccomp2", "pigz", "bash", "ca-certificates", "curl", "jq",
            "procps", "containernetworking-plugins")
#: The CNI plugins a single-node kind cluster uses (kind's base image builds the same four).
CNI_PLUGINS = ("host-local", "loopback", "ptp", "portmap")
ENTRYPOINT = '["/usr/local/bin/entrypoint", "/sbin/init"]'
#: Where each control-plane program lives in its image; kubeadm's manifests call them by name.
IMAGE_PROGRAMS = {"kube-apiserver": "kube-apiserver", "kube-controller-manager": "kube-controller-manager",
                  "kube-scheduler": "kube-scheduler", "etcd": "etcd"}
#: Bump when the base recipe below changes, so that an image made by the old recipe is not reused.
RECIPE = 1
DOCKER_HINT = ("'krmcourse doctor' checks that Docker answers; then run 'krmcourse toolchain install --provider kind' "
               "again (what is already made is kept).")


def _digest(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:12]


def base_tag() -> str:
    return f"krmcourse/kind-base:{pins.DEBIAN}-" + _digest(PACKAGES, CNI_PLUGINS, pins.KIND, pins.CONTAINERD,
                                                            pins.RUNC, RECIPE)


def node_tag() -> str:
    """Named for the Kubernetes version, and for the builds it holds: a rebuilt component makes a new tag."""
    builds = [(c.folder / ".built").stat().st_mtime_ns if (c.folder / ".built").is_file() else None
              for c in toolchain.KIND_COMPONENTS]
    return f"krmcourse/kind-node:{pins.KUBERNETES}-" + _digest(base_tag(), builds)


def chosen_image() -> str | None:
    """The node image a kind cluster should use; None means kind's own published, digest-pinned default."""
    choice = os.environ.get("KRMCOURSE_KIND_IMAGE", "")
    if choice == "published":
        return None
    return choice or node_tag()


def ready() -> bool:
    """Whether the node image to use is at hand (a published one is pulled by kind itself)."""
    image = chosen_image()
    return image is None or image_exists(image)


def docker(*args: str, input: bytes | None = None, timeout: float = 600, check: bool = True,
           hint: str = DOCKER_HINT) -> subprocess.CompletedProcess[bytes]:
    """Run a docker command; a failure (with ``check``) is a ToolchainError that ends in ``hint``."""
    try:
        done = subprocess.run(["docker", *args], input=input, capture_output=True, timeout=timeout)
    except FileNotFoundError as exc:
        raise ProviderError("Docker is not installed, and the course's images are Docker images.", hint) from exc
    if check and done.returncode != 0:
        raise ToolchainError(f"'docker {' '.join(args[:3])}' failed: {done.stderr.decode(errors='replace')[-1500:]}",
                             hint)
    return done


def image_exists(image: str) -> bool:
    try:
        return docker("image", "inspect", image, check=False, timeout=60).returncode == 0
    except ProviderError:
        return False


def build(say: Say = print, force: bool = False) -> str:
    """Make the node image (and its base) unless already there; its tag. Each phase is timed."""
    if os.environ.get("KRMCOURSE_KIND_IMAGE"):
        raise ToolchainError("KRMCOURSE_KIND_IMAGE is set, so the node image is not built here.",
                             "Unset it to build the local node image.")
    if docker("info", check=False, timeout=60).returncode != 0:
        raise ProviderError("Docker is installed but its engine does not answer ('docker info' failed).",
                            DOCKER_HINT)
    missing = [c for c in toolchain.KIND_COMPONENTS if not c.built]
    if missing:
        raise ToolchainError(f"The node image needs {', '.join(c.name + ' ' + c.version for c in missing)}.",
                             "Run 'krmcourse toolchain install --provider kind'.")
    tag = node_tag()
    if image_exists(tag) and not force:
        say(f"  node image {tag} is already there")
        return tag
    with timed("kind base image", say):
        if force or not image_exists(base_tag()):
            _build_base(say)
    with timed("kind component images", say):
        images = _component_images(say)
    with timed("kind node image", say):
        _assemble(images, say)
    for stale in older_tags("krmcourse/kind-node", tag) + older_tags("krmcourse/kind-base", base_tag()):
        docker("rmi", stale, check=False)  # each is over a gigabyte; a cluster still using one keeps it
    say(f"  node image {tag} is ready")
    return tag


def older_tags(repository: str, current: str) -> list[str]:
    """Tags of ``repository`` in the engine other than ``current``: images an earlier recipe made."""
    done = docker("images", repository, "--format", "{{.Repository}}:{{.Tag}}", check=False)
    return [t for t in done.stdout.decode().split() if t != current]


@contextmanager
def timed(phase: str, say: Say) -> Iterator[None]:
    started = time.monotonic()
    say(f"  {phase} ...")
    yield
    seconds = time.monotonic() - started
    toolchain._record_time(phase, seconds)
    say(f"  {phase}: {seconds:.0f} s")


# ------------------------------------------------------------------------------------------- base
def _kind_files() -> Path:
    return toolchain.module_source("sigs.k8s.io/kind", pins.KIND) / "images" / "base" / "files"


def _build_base(say: Say) -> None:
    with debootstrap(PACKAGES, "the node image", say) as root:
        _install_kind_files(root)
        _install_runtime(root)
        _configure_systemd(root)
        say("  importing the base image")
        import_folder(root, base_tag(), ["ENV container=docker", f"ENTRYPOINT {ENTRYPOINT}"])


@contextmanager
def debootstrap(packages: tuple[str, ...], image: str, say: Say) -> Iterator[Path]:
    """A Debian root file system holding ``packages``, made by debootstrap in the cache for the block to
    finish and import; removed afterwards, whatever happens. ``image`` names what it is for, in errors."""
    if os.geteuid() != 0:
        raise ToolchainError(f"Making {image}'s root file system with debootstrap needs root.",
                             "Run the command with sudo, or, for the kind node image, use kind's published "
                             "node image: KRMCOURSE_KIND_IMAGE=published.")
    if not shutil.which("debootstrap"):
        raise ToolchainError(f"debootstrap is not installed; it makes {image}'s Debian root file system.",
                             "Install it (Debian: apt-get install debootstrap), or, for the kind node image, use "
                             "kind's published node image: KRMCOURSE_KIND_IMAGE=published.")
    work = cache_dir() / "toolchain" / f".rootfs-{re.sub(r'[^a-z0-9]+', '-', image.lower()).strip('-')}"
    remove_tree(work)  # a half-made root file system from an interrupted build
    work.mkdir(parents=True)
    root = work / "rootfs"
    try:
        say(f"  debootstrap {pins.DEBIAN} ({len(packages)} packages)")
        done = subprocess.run(["debootstrap", "--variant=minbase", f"--include={','.join(packages)}", pins.DEBIAN,
                               str(root)], capture_output=True, text=True, timeout=1800)
        if done.returncode != 0:
            raise ToolchainError(f"debootstrap failed:\n{(done.stdout + done.stderr)[-2000:]}",
                                 "Check that Debian's package mirror is reachable, then try again.")
        yield root
    finally:
        remove_tree(work)


def remove_tree(folder: Path) -> None:
    """Remove a root file system folder, unmounting first what an interrupted debootstrap left mounted
    in it (its /proc, say): removing files through a live mount would reach the real ones."""
    if not folder.exists():
        return
    inside = str(folder.resolve()) + "/"
    with open("/proc/self/mounts") as fh:
        mounts = [line.split()[1].replace("\\040", " ") for line in fh]
    for mount in sorted((m for m in mounts if m.startswith(inside)), key=len, reverse=True):
        subprocess.run(["umount", "-l", mount], capture_output=True)
    shutil.rmtree(folder)


def _install_kind_files(root: Path) -> None:
    """kind's own files, with the modes its Dockerfile gives them: scripts 0755, the rest 0644."""
    source = _kind_files()
    for path in sorted(source.rglob("*")):
        rel = path.relative_to(source)
        target = root / rel
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
            target.chmod(0o755)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
        executable = rel.parts[:3] == ("usr", "local", "bin") or rel.parts[:2] == ("kind", "bin")
        target.chmod(0o755 if executable else 0o644)


def _install_runtime(root: Path) -> None:
    for command in toolchain.CONTAINERD.commands:
        _copy_program(toolchain.CONTAINERD.binary(command), root / "usr/local/bin" / command)
    _copy_program(toolchain.RUNC.binary("runc"), root / "usr/local/sbin/runc")
    for plugin in CNI_PLUGINS:
        _copy_program(root / "usr/lib/cni" / plugin, root / "opt/cni/bin" / plugin)
    # The OCI spec every container starts from: containerd's default, plus kind's hook that gives each
    # container the node's product_uuid, and without rlimits (as kind's base image makes it).
    spec = json.loads(subprocess.run([str(toolchain.CONTAINERD.binary("ctr")), "oci", "spec"], check=True,
                                     capture_output=True, text=True).stdout)
    hooks = spec.setdefault("hooks", {}).setdefault("createContainer", [])
    hooks.append({"path": "/kind/bin/mount-product-files.sh"})
    spec.get("process", {}).pop("rlimits", None)
    (root / "etc/containerd/cri-base.json").write_text(json.dumps(spec, indent=2))


def _copy_program(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    target.chmod(0o755)


def _configure_systemd(root: Path) -> None:
    """What kind's base Dockerfile does to systemd: only the units a node needs, no kernel log."""
    script = """set -e
find /lib/systemd/system/sysinit.target.wants/ -name systemd-tmpfiles-setup.service -delete
rm -f /lib/systemd/system/multi-user.target.wants/* /etc/systemd/system/*.wants/* \
      /lib/systemd/system/local-fs.target.wants/* /lib/systemd/system/sockets.target.wants/*udev* \
      /lib/systemd/system/sockets.target.wants/*initctl* /lib/systemd/system/basic.target.wants/*
echo ReadKMsg=no >> /etc/systemd/journald.conf
ln -sf /usr/lib/systemd/systemd /sbin/init
systemctl enable kubelet.service containerd.service undo-mount-hacks.service
systemctl mask systemd-binfmt.service
mkdir -p /etc/kubernetes/manifests
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /usr/share/doc /usr/share/man /usr/share/locale
"""
    done = subprocess.run(["chroot", str(root), "/bin/sh", "-c", script], capture_output=True, text=True)
    if done.returncode != 0:
        raise ToolchainError(f"Configuring systemd in the node's root file system failed:\n{done.stderr[-2000:]}",
                             "Run 'krmcourse toolchain install --provider kind' again.")


def import_folder(root: Path, tag: str, changes: list[str]) -> None:
    """``docker import`` a folder as an image, streaming it through tar."""
    args = ["docker", "import"]
    for change in changes:
        args += ["--change", change]
    tar = subprocess.Popen(["tar", "--numeric-owner", "-C", str(root), "-cf", "-", "."], stdout=subprocess.PIPE)
    try:
        done = subprocess.run([*args, "-", tag], stdin=tar.stdout, capture_output=True, timeout=1200)
    finally:
        assert tar.stdout is not None
        tar.stdout.close()
        tar.wait()
    if done.returncode != 0 or tar.returncode != 0:
        raise ToolchainError(f"docker import of {tag} failed: {done.stderr.decode(errors='replace')[-1500:]}",
                             DOCKER_HINT)


# ------------------------------------------------------------------------------------------- images
def kubeadm_images() -> dict[str, str]:
    """Short name -> full image name, as kubeadm lists them for the pinned Kubernetes version."""
    kubeadm = toolchain.KUBERNETES_NODE.binary("kubeadm")
    out = subprocess.run([str(kubeadm), "config", "images", "list", "--kubernetes-version", pins.KUBERNETES],
                         capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise ToolchainError(f"kubeadm could not list its images: {out.stderr[-1000:]}",
                             "Rebuild it: 'krmcourse toolchain install --provider kind --force'.")
    images = {}
    for line in out.stdout.split():
        name = line.rsplit("/", 1)[-1].split(":", 1)[0]
        images[name] = line
    return images


def sandbox_image() -> str:
    """The pause image kind's containerd configuration names, which is the one containerd will run."""
    config = (_kind_files() / "etc" / "containerd" / "config.toml").read_text()
    match = re.search(r'^\s*sandbox_image\s*=\s*"([^"]+)"', config, re.M)
    if not match:
        raise ToolchainError("kind's containerd configuration names no sandbox image.",
                             "The kind pin in krmcourse/pins.py may be wrong.")
    return match[1]


def _check_versions(images: dict[str, str]) -> None:
    expected = {"etcd": pins.NODE_ETCD.lstrip("v") + "-", "coredns": pins.COREDNS,
                "kube-apiserver": pins.KUBERNETES}
    for name, prefix in expected.items():
        tag = images.get(name, ":").rsplit(":", 1)[1]
        if not tag.startswith(prefix):
            raise ToolchainError(f"kubeadm {pins.KUBERNETES} asks for {name} {tag}, but the pins build {prefix}.",
                                 "Change NODE_ETCD or COREDNS in krmcourse/pins.py to what kubeadm asks for.")


def _component_images(say: Say) -> Path:
    """Build and save every image the node preloads; the path of one archive holding them all."""
    images = kubeadm_images()
    _check_versions(images)
    archive = cache_dir() / "toolchain" / ".kind-images.tar"
    names = []
    with tempfile.TemporaryDirectory(prefix="krmcourse-images-") as tmp:
        for name, program in IMAGE_PROGRAMS.items():
            component = toolchain.NODE_ETCD if name == "etcd" else toolchain.KUBERNETES
            _program_image(component.binary(program), f"/usr/local/bin/{program}", images[name], Path(tmp),
                           entrypoint=f'["/usr/local/bin/{program}"]')
            names.append(images[name])
        _program_image(toolchain.COREDNS.binary("coredns"), "/coredns", images["coredns"], Path(tmp),
                       entrypoint='["/coredns"]')
        _program_image(toolchain.PAUSE.binary("pause"), "/pause", sandbox_image(), Path(tmp),
                       entrypoint='["/pause"]')
        names += [images["coredns"], sandbox_image()]
    # kube-proxy programs iptables, so its image is the node's base (which has iptables and conntrack).
    _kube_proxy_image(images["kube-proxy"])
    names.append(images["kube-proxy"])
    say(f"  saving {len(names)} images for preloading")
    try:
        docker("save", "-o", str(archive), *names, timeout=1200)
    finally:
        # They live on in the archive, and then in the node image; the engine need not keep them.
        docker("rmi", *names, check=False)
    return archive


def _program_image(binary: Path, inside: str, tag: str, tmp: Path, entrypoint: str) -> None:
    """An image holding one static program (and a /tmp), made with ``docker import``."""
    layer = tmp / f"{binary.name}.tar"
    with tarfile.open(layer, "w") as tar:
        tmpdir = tarfile.TarInfo("tmp")
        tmpdir.type, tmpdir.mode = tarfile.DIRTYPE, 0o1777
        tar.addfile(tmpdir)
        info = tar.gettarinfo(str(binary), arcname=inside.lstrip("/"))
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        info.mode = 0o755
        with open(binary, "rb") as fh:
            tar.addfile(info, fh)
    docker("import", "--change", f"ENTRYPOINT {entrypoint}", "--change",
            "ENV PATH=/usr/local/bin:/usr/bin:/bin", str(layer), tag)


def _kube_proxy_image(tag: str) -> None:
    with _container(base_tag()) as cid:
        docker("cp", str(toolchain.KUBERNETES_NODE.binary("kube-proxy")), f"{cid}:/usr/local/bin/kube-proxy")
        docker("commit", "--change", 'ENTRYPOINT ["/usr/local/bin/kube-proxy"]', cid, tag)


@contextmanager
def _container(image: str) -> Iterator[str]:
    """A container of ``image`` that only sleeps, for copying into and committing; removed afterwards."""
    cid = docker("run", "-d", "--entrypoint=sleep", "--security-opt", "seccomp=unconfined", image,
                  "infinity").stdout.decode().strip()
    try:
        yield cid
    finally:
        docker("rm", "-f", "-v", cid, check=False)


# ------------------------------------------------------------------------------------------- node
def _assemble(archive: Path, say: Say) -> None:
    """The base plus kubelet, kubeadm and kubectl, and every image preloaded, as kind's builder does."""
    try:
        with _container(base_tag()) as cid:
            for command in ("kubelet", "kubeadm", "kubectl"):
                docker("cp", str(toolchain.KUBERNETES_NODE.binary(command)), f"{cid}:/usr/bin/{command}")
            docker("exec", cid, "sh", "-c", f"echo {pins.KUBERNETES} > /kind/version")
            docker("exec", cid, "bash", "-c", "nohup containerd > /dev/null 2>&1 &")
            deadline = time.monotonic() + 60
            while docker("exec", cid, "ctr", "version", check=False).returncode != 0:
                if time.monotonic() > deadline:
                    raise ToolchainError("containerd did not start in the node image build container.",
                                         "Run 'krmcourse toolchain install --provider kind' again.")
                time.sleep(0.5)
            say("  preloading the images into the node's containerd")
            with open(archive, "rb") as fh:
                done = subprocess.run(["docker", "exec", "-i", cid, "ctr", "--namespace=k8s.io", "images", "import",
                                       "--label=io.cri-containerd.pinned=pinned", "--all-platforms", "--no-unpack",
                                       "--digests", "-"], stdin=fh, capture_output=True, timeout=1200)
            if done.returncode != 0:
                raise ToolchainError(f"Preloading the images failed: {done.stderr.decode(errors='replace')[-1500:]}",
                                     "Run 'krmcourse toolchain install --provider kind' again.")
            # Let containerd close its database before the container is committed.
            # (The build container's PID 1 is sleep, which reaps nobody: a stopped containerd stays a zombie.)
            docker("exec", cid, "sh", "-c",
                    "pkill containerd; while ps -o stat= -C containerd | grep -qv Z; do sleep 0.2; done")
            docker("commit", cid, f"{node_tag()}-unfinished")
        # docker commit cannot set the stop signal; a build with no context can. systemd, the node's
        # PID 1, shuts down cleanly on SIGRTMIN+3, as kind's own node image says.
        dockerfile = (f"FROM {node_tag()}-unfinished\nSTOPSIGNAL SIGRTMIN+3\nENTRYPOINT {ENTRYPOINT}\n"
                      f"LABEL krmcourse.kubernetes={pins.KUBERNETES}\n")
        done = subprocess.run(["docker", "build", "-q", "-t", node_tag(), "-"], input=dockerfile.encode(),
                              capture_output=True, env={**os.environ, "DOCKER_BUILDKIT": "0"}, timeout=600)
        if done.returncode != 0:
            raise ToolchainError(f"Finishing the node image failed: {done.stderr.decode(errors='replace')[-1500:]}",
                                 DOCKER_HINT)
    finally:
        archive.unlink(missing_ok=True)
        docker("rmi", f"{node_tag()}-unfinished", check=False)
