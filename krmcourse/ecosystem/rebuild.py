"""Rebuild the committed ecosystem tables in ``datasets/`` from the pinned sources.

    python -m krmcourse.ecosystem.rebuild                      # download (cached), extract, write datasets/
    python -m krmcourse.ecosystem.rebuild --check              # rebuild into a temporary folder and diff
    python -m krmcourse.ecosystem.rebuild --check --offline    # the same from the cache only, no pip

``krmcourse dataset rebuild [--check] [--offline]`` runs the same :func:`main`. Only pip downloads, and
only the pinned files, each checked against its sha256 (nothing is installed, and no file is extracted
to disk: members are read straight from the archives). The Kubernetes release dates are recorded data
(:mod:`krmcourse.ecosystem.releases`), so no registry is asked when each release came out.
"""

from __future__ import annotations

import argparse
import csv
import difflib
import filecmp
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from krmcourse.ecosystem import extract, releases
from krmcourse.ecosystem.errors import EcosystemError
from krmcourse.ecosystem.loading import KINDS_COLUMNS
from krmcourse.ecosystem.sources import SOURCES, Archive, Source, fetch, source

#: The tables rebuild writes, each with its columns in order. Hand-made files are not among them.
BUILTIN_COLUMNS = ("k8s_version", "group", "version", "kind")
PROVENANCE_COLUMNS = ("key", "package", "version", "file", "sha256", "licence", "provides")
LOG_COLUMNS = ("source", "step", "count")
RELEASES = "kubernetes_releases.csv"
GENERATED = ("kinds.csv", "builtin_kinds.csv", RELEASES, "PROVENANCE.csv", "rebuild_log.csv")


def default_out() -> Path:
    """``datasets/`` at the repository root."""
    return Path(__file__).resolve().parents[2] / "datasets"


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def write_table(path: Path, columns: Sequence[str], rows: Iterable[Mapping[str, Any]]) -> int:
    """Write rows as CSV with fixed columns and Unix newlines, so rebuilds are byte-for-byte stable."""
    count = 0
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(columns)
        for row in rows:
            writer.writerow([_cell(row.get(col)) for col in columns])
            count += 1
    return count


def rebuild(out: Path, cache: Path | None = None, sources: Sequence[Source] = SOURCES,
            download: bool = True) -> dict[str, int]:
    """Fetch every pinned source, extract it, and write the generated tables into ``out``.

    Returns the number of rows written per table. With ``download=False`` only files already in the
    cache are used (still checked against their sha256), so no registry is asked. When a release the
    schemas cover has no recorded date, every other table is written first and the :class:`SourceError`
    is raised afterwards, with ``kubernetes_releases.csv`` in ``out`` left as it was.
    """
    out.mkdir(parents=True, exist_ok=True)
    paths = {src.key: fetch(src, cache, download=download) for src in sources}
    log: list[dict[str, Any]] = []

    with Archive(paths["k8s-schemas-old"]) as old, Archive(paths["k8s-schemas"]) as new:
        builtin = extract.builtin_kinds([old, new])
    log += _log("kubernetes-validate", builtin, len(builtin.rows), "rows (k8s version, group, version, kind)")

    with Archive(paths["openshift-dump"]) as archive:
        dump_version = extract.openshift_cluster_version(archive)
        cluster = extract.minor_of(dump_version)
        core = {(r["group"], r["kind"]) for r in builtin.rows if r["k8s_version"] == cluster}
        if not core:
            raise EcosystemError(
                f"the schema dump is of Kubernetes {dump_version}, but no pinned kubernetes-validate "
                "release covers that version; pin one that does in krmcourse/ecosystem/sources.py"
            )
        dump = extract.openshift_kinds(archive, core)
    log += _log("openshift-dump", dump, len(dump.rows), "rows (group, version, kind)")
    log.append({"source": "openshift-dump", "step": f"cluster version {dump.facts['cluster_version']}",
                "count": 1})

    with Archive(paths["dask-crds"]) as archive:
        dask = extract.dask_kinds(archive)
    log += _log("dask-crds", dask, len(dask.rows), "rows (group, version, kind)")

    minors = {r["k8s_version"] for r in builtin.rows}
    release_error: EcosystemError | None = None
    try:
        release_rows = releases.release_rows(minors)
    except EcosystemError as err:
        release_rows, release_error = [], err

    counts = {
        "kinds.csv": write_table(out / "kinds.csv", KINDS_COLUMNS, dump.rows + dask.rows),
        "builtin_kinds.csv": write_table(out / "builtin_kinds.csv", BUILTIN_COLUMNS, builtin.rows),
        "PROVENANCE.csv": write_table(out / "PROVENANCE.csv", PROVENANCE_COLUMNS, provenance_rows(sources, minors)),
        "rebuild_log.csv": write_table(out / "rebuild_log.csv", LOG_COLUMNS, log),
    }
    if release_error is not None:
        raise EcosystemError(f"{RELEASES} was not rebuilt (the other tables were): {release_error}")
    counts[RELEASES] = write_table(out / RELEASES, releases.RELEASES_COLUMNS, release_rows)
    return counts


def provenance_rows(sources: Sequence[Source], minors: Iterable[str]) -> list[dict[str, Any]]:
    """``PROVENANCE.csv``: one row per pinned package, then the row for the recorded release dates.

    It needs no download, so a test can compare it with the committed file without a registry.
    """
    rows: list[dict[str, Any]] = [
        {"key": s.key, "package": s.package, "version": s.version, "file": s.filename, "sha256": s.sha256,
         "licence": s.licence, "provides": s.provides} for s in sources
    ]
    return rows + [releases.provenance_row(minors)]


def _log(name: str, ex: extract.Extraction, kept: int, what: str) -> list[dict[str, Any]]:
    rows = [{"source": name, "step": f"kept: {what}", "count": kept}]
    rows += [{"source": name, "step": f"dropped: {why}", "count": n} for why, n in sorted(ex.dropped.items())]
    return rows


def check(committed: Path, cache: Path | None = None, download: bool = True) -> dict[str, list[str]]:
    """Rebuild into a temporary folder; return each generated file that differs from ``committed``,
    with the start of a unified diff (committed -> rebuilt) so a maintainer sees what changed.
    """
    with tempfile.TemporaryDirectory(prefix="krmcourse-dataset-") as tmp:
        rebuild(Path(tmp), cache, download=download)
        return {name: diff for name in GENERATED if (diff := _diff(committed / name, Path(tmp) / name))}


def _diff(committed: Path, rebuilt: Path, limit: int = 40) -> list[str]:
    """The first ``limit`` lines of a unified diff between two tables; empty when they are identical."""
    if committed.exists() and filecmp.cmp(committed, rebuilt, shallow=False):
        return []
    old = committed.read_text(encoding="utf-8").splitlines() if committed.exists() else []
    new = rebuilt.read_text(encoding="utf-8").splitlines()
    lines = list(difflib.unified_diff(old, new, f"committed/{committed.name}", f"rebuilt/{rebuilt.name}",
                                      lineterm="", n=0))
    lines = lines or ["(the files differ only in line endings or a final newline)"]
    return lines[:limit] + ([f"... {len(lines) - limit} more lines"] if len(lines) > limit else [])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="krmcourse dataset rebuild", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=default_out(), help="folder for the tables")
    parser.add_argument("--cache", type=Path, default=None, help="folder for downloads (kept between runs)")
    parser.add_argument("--check", action="store_true", help="rebuild elsewhere and compare with --out")
    parser.add_argument("--offline", action="store_true",
                        help="use only files already in the cache (checked by sha256); never run pip")
    parser.add_argument("--source", action="append", default=[], help="only fetch this source key (repeat)")
    args = parser.parse_args(argv)
    download = not args.offline
    try:
        if args.source:
            for key in args.source:
                print(fetch(source(key), args.cache, download=download))
            return 0
        if args.check:
            return _report(check(args.out, args.cache, download=download))
        for name, count in rebuild(args.out, args.cache, download=download).items():
            print(f"{args.out / name}: {count} rows")
        return 0
    except EcosystemError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


def _report(differ: Mapping[str, list[str]]) -> int:
    """Print what ``--check`` found; 1 when a table differs, so a maintainer's script can stop on it."""
    if not differ:
        print("the committed tables match a fresh rebuild from the pinned sources")
        return 0
    print("these tables differ from a fresh rebuild: " + ", ".join(differ), file=sys.stderr)
    for lines in differ.values():
        print("\n".join(lines), file=sys.stderr)
    print("If the change is expected, run `krmcourse dataset rebuild` and commit the tables.", file=sys.stderr)
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
