"""When each Kubernetes minor release was tagged, as the Go module proxy records it.

Kubernetes publishes its repository as the Go module ``k8s.io/kubernetes``, and the module proxy keeps,
for every version it has served, the time of the tagged commit. ``go list -m -json
k8s.io/kubernetes@v1.30.0`` prints that time in its ``Time`` field. Asking the ordinary Go client for it
makes the release dates of the growth analysis reproducible instead of typed in from memory.

The client runs from an empty temporary folder (no ``go.mod`` is needed for ``go list -m`` of a named
version) with ``GOFLAGS=-mod=mod`` so a user's ``-mod=vendor`` cannot interfere, ``GOTOOLCHAIN=local`` so
it never downloads another toolchain, and ``GOWORK=off`` so no workspace file applies.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from typing import Any

from krmcourse.ecosystem.errors import SourceError

MODULE = "k8s.io/kubernetes"
RELEASES_COLUMNS = ("version", "tag_time", "source")
GO_ENV = {"GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local", "GOWORK": "off"}


def minor_sort_key(minor: str) -> tuple[int, ...]:
    """``"v1.9"`` sorts before ``"v1.10"``."""
    return tuple(int(part) for part in minor.lstrip("v").split("."))


def tag_of(minor: str) -> str:
    """The first tag of a minor release: ``v1.30`` -> ``v1.30.0``."""
    parts = minor.lstrip("v").split(".")
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise ValueError(f"{minor!r} is not a Kubernetes minor version like 'v1.30'")
    return f"v{parts[0]}.{parts[1]}.0"


def command(tag: str) -> str:
    """The command that reproduces one row, stored in the table's ``source`` column."""
    return f"go list -m -json {MODULE}@{tag}"


def _decode_stream(text: str) -> list[dict[str, Any]]:
    """``go list -json`` prints one JSON object after another, not a JSON array."""
    decoder = json.JSONDecoder()
    objects: list[dict[str, Any]] = []
    pos = 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            return objects
        obj, pos = decoder.raw_decode(text, pos)
        objects.append(obj)


def tag_times(minors: Iterable[str], go: str | None = None, timeout: float = 300) -> list[dict[str, str]]:
    """One row per minor release (oldest first): its ``.0`` tag, the tag time, and the command used.

    Raises :class:`SourceError` when Go is missing, the proxy cannot be reached, or a release has no
    ``.0`` tag yet (a schema package can cover a release before it ships).
    """
    ordered = sorted(set(minors), key=minor_sort_key)
    if not ordered:
        return []
    go = go or shutil.which("go")
    if not go or not os.path.exists(go):
        raise SourceError(
            "the Kubernetes release table needs the Go toolchain (`go` on PATH), which asks the Go module "
            f"proxy when each {MODULE} tag was published. Install Go (the course toolchain needs it too), "
            "or leave datasets/kubernetes_releases.csv as committed."
        )
    tags = [tag_of(minor) for minor in ordered]
    env = {**os.environ, **GO_ENV}
    with tempfile.TemporaryDirectory(prefix="krmcourse-go-list-") as tmp:
        try:
            done = subprocess.run([go, "list", "-m", "-json", "-e", *(f"{MODULE}@{t}" for t in tags)],
                                  cwd=tmp, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as err:
            raise SourceError(f"`go list -m` for {len(tags)} {MODULE} tags took over {timeout:.0f} s; "
                              "check that the Go module proxy is reachable") from err
    if done.returncode != 0:
        raise SourceError(f"`go list -m -json {MODULE}@...` failed (exit {done.returncode}):\n"
                          f"{done.stderr.strip()[-2000:]}\nCheck that the Go module proxy is reachable.")
    found = {obj.get("Version"): obj for obj in _decode_stream(done.stdout)}
    rows, problems = [], []
    for tag in tags:
        obj = found.get(tag)
        error = (obj or {}).get("Error")
        if obj is None or error or not obj.get("Time"):
            why = error.get("Err", error) if isinstance(error, dict) else (error or "no Time field")
            problems.append(f"{tag}: {why}")
            continue
        rows.append({"version": tag, "tag_time": obj["Time"], "source": command(tag)})
    if problems:
        raise SourceError(f"the Go module proxy has no time for these {MODULE} tags:\n  "
                          + "\n  ".join(problems)
                          + "\nA release the schemas cover must be tagged before the table can be rebuilt.")
    return rows


def provenance_row(minors: Iterable[str]) -> dict[str, str]:
    """The ``PROVENANCE.csv`` row for the release table; it depends only on the releases asked for."""
    tags = [tag_of(m) for m in sorted(set(minors), key=minor_sort_key)]
    return {
        "key": "k8s-release-times",
        "package": f"{MODULE} (Go module)",
        "version": f"{tags[0]} to {tags[-1]} ({len(tags)} tags)" if tags else "",
        "file": "",
        "sha256": "",
        "licence": "Apache-2.0 (module); the times are version metadata kept by the Go module proxy",
        "provides": "kubernetes_releases.csv: the time the Go module proxy records for each v1.N.0 tag, "
                    f"read with `{command('v1.N.0')}` "
                    "(GOFLAGS=-mod=mod GOTOOLCHAIN=local GOWORK=off, in an empty temporary folder)",
    }
