"""When each Kubernetes minor release came out, recorded with the announcement that states the date.

The growth analysis plots the built-in API against the calendar, so it needs the day each release was
published. Every ``v1.N.0`` release is announced on the Kubernetes blog, and the address of each post
carries its date (``/blog/2018/12/03/...``), so anyone can check a row by opening its source.

The dates are recorded here, not fetched. The time the Go module proxy reports for an old tag is when
that proxy first saw the tag: it differs from machine to machine and can trail the release by months
(one machine got 2019-04-25 for v1.13.0, released on 2018-12-03). Recorded data keeps the rebuild and
the tests free of any registry's answer of the day. A new Kubernetes release needs one new row below;
the rebuild refuses to run without it and says so.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise

from krmcourse.ecosystem.errors import SourceError

#: Columns of ``kubernetes_releases.csv``: the ``.0`` release, the date its announcement states, and where.
RELEASES_COLUMNS = ("version", "release_date", "source")
BLOG = "https://kubernetes.io/blog/"
_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")


@dataclass(frozen=True)
class ReleaseDate:
    """One ``v1.N.0`` release: its tag, the day it was published (UTC date), and where that is stated."""

    version: str
    date: str
    source: str


#: The release announcement of every minor release the pinned schemas cover, oldest first.
RELEASE_DATES: tuple[ReleaseDate, ...] = (
    ReleaseDate("v1.11.0", "2018-06-27", f"{BLOG}2018/06/27/kubernetes-1.11-release-announcement/"),
    ReleaseDate("v1.12.0", "2018-09-27", f"{BLOG}2018/09/27/kubernetes-1-12-release-announcement/"),
    ReleaseDate("v1.13.0", "2018-12-03", f"{BLOG}2018/12/03/kubernetes-1-13-release-announcement/"),
    ReleaseDate("v1.14.0", "2019-03-25", f"{BLOG}2019/03/25/kubernetes-1-14-release-announcement/"),
    ReleaseDate("v1.15.0", "2019-06-19", f"{BLOG}2019/06/19/kubernetes-1-15-release-announcement/"),
    ReleaseDate("v1.16.0", "2019-09-18", f"{BLOG}2019/09/18/kubernetes-1-16-release-announcement/"),
    ReleaseDate("v1.17.0", "2019-12-09", f"{BLOG}2019/12/09/kubernetes-1-17-release-announcement/"),
    ReleaseDate("v1.18.0", "2020-03-25", f"{BLOG}2020/03/25/kubernetes-1-18-release-announcement/"),
    ReleaseDate("v1.19.0", "2020-08-26", f"{BLOG}2020/08/26/kubernetes-release-1.19-accentuate-the-paw-sitive/"),
    ReleaseDate("v1.20.0", "2020-12-08", f"{BLOG}2020/12/08/kubernetes-1-20-release-announcement/"),
    ReleaseDate("v1.21.0", "2021-04-08", f"{BLOG}2021/04/08/kubernetes-1-21-release-announcement/"),
    ReleaseDate("v1.22.0", "2021-08-04", f"{BLOG}2021/08/04/kubernetes-1-22-release-announcement/"),
    ReleaseDate("v1.23.0", "2021-12-07", f"{BLOG}2021/12/07/kubernetes-1-23-release-announcement/"),
    ReleaseDate("v1.24.0", "2022-05-03", f"{BLOG}2022/05/03/kubernetes-1-24-release-announcement/"),
    ReleaseDate("v1.25.0", "2022-08-23", f"{BLOG}2022/08/23/kubernetes-v1-25-release/"),
    ReleaseDate("v1.26.0", "2022-12-09", f"{BLOG}2022/12/09/kubernetes-v1-26-release/"),
    ReleaseDate("v1.27.0", "2023-04-11", f"{BLOG}2023/04/11/kubernetes-v1-27-release/"),
    ReleaseDate("v1.28.0", "2023-08-15", f"{BLOG}2023/08/15/kubernetes-v1-28-release/"),
    ReleaseDate("v1.29.0", "2023-12-13", f"{BLOG}2023/12/13/kubernetes-v1-29-release/"),
    ReleaseDate("v1.30.0", "2024-04-17", f"{BLOG}2024/04/17/kubernetes-v1-30-release/"),
    ReleaseDate("v1.31.0", "2024-08-13", f"{BLOG}2024/08/13/kubernetes-v1-31-release/"),
    ReleaseDate("v1.32.0", "2024-12-11", f"{BLOG}2024/12/11/kubernetes-v1-32-release/"),
    ReleaseDate("v1.33.0", "2025-04-23", f"{BLOG}2025/04/23/kubernetes-v1-33-release/"),
    ReleaseDate("v1.34.0", "2025-08-27", f"{BLOG}2025/08/27/kubernetes-v1-34-release/"),
    ReleaseDate("v1.35.0", "2025-12-17", f"{BLOG}2025/12/17/kubernetes-v1-35-release/"),
    ReleaseDate("v1.36.0", "2026-04-22", f"{BLOG}2026/04/22/kubernetes-v1-36-release/"),
    ReleaseDate("v1.37.0", "2026-08-26", f"{BLOG}2026/08/26/kubernetes-v1-37-release/"),
)


def minor_sort_key(minor: str) -> tuple[int, ...]:
    """``"v1.9"`` sorts before ``"v1.10"``."""
    return tuple(int(part) for part in minor.lstrip("v").split("."))


def tag_of(minor: str) -> str:
    """The first tag of a minor release: ``v1.30`` -> ``v1.30.0``."""
    parts = minor.lstrip("v").split(".")
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise ValueError(f"{minor!r} is not a Kubernetes minor version like 'v1.30'")
    return f"v{parts[0]}.{parts[1]}.0"


def record_problems(records: Sequence[ReleaseDate] = RELEASE_DATES) -> list[str]:
    """What is wrong with the recorded rows: a malformed date, a source that does not state that date,
    a duplicate, or a later release dated before an earlier one. Empty when every row is sound.

    A blog address states the day of its post, so a date typed wrong disagrees with its own source.
    """
    problems: list[str] = []
    seen: set[str] = set()
    for rec in records:
        match = _DATE.match(rec.date)
        if not match:
            problems.append(f"{rec.version}: {rec.date!r} is not a date like 2018-12-03")
        elif not rec.source:
            problems.append(f"{rec.version}: no source says when it was released")
        elif rec.source.startswith(BLOG) and f"/{'/'.join(match.groups())}/" not in rec.source:
            problems.append(f"{rec.version}: dated {rec.date}, but its source {rec.source} is of another day")
        if rec.version in seen:
            problems.append(f"{rec.version}: recorded twice")
        seen.add(rec.version)
    ordered = sorted(records, key=lambda r: minor_sort_key(r.version))
    for earlier, later in pairwise(ordered):
        if later.date <= earlier.date:
            problems.append(f"{later.version} ({later.date}) is not dated after {earlier.version} ({earlier.date})")
    return problems


def release_rows(minors: Iterable[str], records: Sequence[ReleaseDate] = RELEASE_DATES) -> list[dict[str, str]]:
    """One row of ``kubernetes_releases.csv`` per minor release, oldest first.

    Raises :class:`SourceError` when the records are inconsistent, or when a release the schemas cover has
    no recorded date yet (a schema package can cover a release before this table is updated).
    """
    problems = record_problems(records)
    if problems:
        raise SourceError("the recorded Kubernetes release dates in krmcourse/ecosystem/releases.py are "
                          "inconsistent:\n  " + "\n  ".join(problems))
    by_tag = {rec.version: rec for rec in records}
    ordered = sorted(set(minors), key=minor_sort_key)
    missing = [tag_of(m) for m in ordered if tag_of(m) not in by_tag]
    if missing:
        raise SourceError(
            f"no release date is recorded for {', '.join(missing)}, which the pinned schemas cover. Add a "
            "ReleaseDate to RELEASE_DATES in krmcourse/ecosystem/releases.py, with the date and the address "
            "of the release announcement that states it."
        )
    return [{"version": rec.version, "release_date": rec.date, "source": rec.source}
            for rec in (by_tag[tag_of(m)] for m in ordered)]


def provenance_row(minors: Iterable[str]) -> dict[str, str]:
    """The ``PROVENANCE.csv`` row for the release table; it depends only on the releases asked for."""
    tags = [tag_of(m) for m in sorted(set(minors), key=minor_sort_key)]
    return {
        "key": "k8s-release-dates",
        "package": "Kubernetes release announcements (the Kubernetes blog)",
        "version": f"{tags[0]} to {tags[-1]} ({len(tags)} releases)" if tags else "",
        "file": "",
        "sha256": "",
        "licence": "CC-BY-4.0 (the blog posts); only the dates are taken",
        "provides": "kubernetes_releases.csv: the date each v1.N.0 release was published, as its release "
                    "announcement states it (the date of the post, which is also in its address); recorded "
                    "in krmcourse/ecosystem/releases.py with the address in each row's source column",
    }
