"""A timeline of what happened in a namespace while a block of code ran: watch events and Events.

Two sources, both real: a watch on the kinds you name (each ADDED, MODIFIED or DELETED as the client
received it, with a short description of what changed), and the Kubernetes Events that controllers
posted in the same window. The data model (:class:`TimelineEntry`, :func:`entries_from_events`,
:func:`describe_change`) is pure; :class:`WatchRecorder` does the watching in a thread of its own, so
it works from a notebook whose event loop is already running; :class:`EventTimeline` ties them
together as a context manager and shows an HTML table.

>>> with EventTimeline(lab, "demo", ["greetings.controllers.krmcourse.dev", "configmaps"]) as tl:  # doctest: +SKIP
...     lab.apply(...)
>>> tl                                                                                             # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import html
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from .. import controllerkit
from ..background import LoopThread

Obj = dict[str, Any]

# Fields that change on every write and say nothing about what a controller did.
_NOISE = {"resourceVersion", "managedFields", "generation"}


class Cluster(Protocol):
    """What the timeline needs from a cluster, as a :class:`krmcourse.Lab` provides it."""

    @property
    def kubeconfig(self) -> Path: ...

    def objects(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]: ...


@dataclass(frozen=True, order=True)
class TimelineEntry:
    time: datetime
    source: str  # "watch" or "event"
    kind: str
    name: str
    what: str  # ADDED/MODIFIED/DELETED or the Event's reason
    detail: str = ""
    by: str = ""  # the field manager (watch) or reporting component (event)
    precise: bool = True  # False for Events that carry only whole-second timestamps


def parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def describe_change(old: Obj | None, new: Obj) -> str:
    """Which parts of an object a write changed, in a few words (pure; for MODIFIED events)."""
    if old is None:
        return ""
    changes = []
    old_meta, new_meta = old.get("metadata", {}), new.get("metadata", {})
    for key in sorted(set(old_meta) | set(new_meta)):
        if key in _NOISE or old_meta.get(key) == new_meta.get(key):
            continue
        if key == "finalizers":
            before, after = set(old_meta.get(key) or []), set(new_meta.get(key) or [])
            changes += [f"+finalizer {f}" for f in sorted(after - before)]
            changes += [f"-finalizer {f}" for f in sorted(before - after)]
        elif key == "deletionTimestamp":
            changes.append("deletion requested")
        else:
            changes.append(f"metadata.{key}")
    for part in ("spec", "data"):
        if old.get(part) != new.get(part):
            changes.append(part)
    old_status, new_status = old.get("status") or {}, new.get("status") or {}
    if old_status != new_status:
        conditions = {c.get("type"): c.get("status") for c in new_status.get("conditions") or []}
        earlier = {c.get("type"): c.get("status") for c in old_status.get("conditions") or []}
        flips = [f"{t}={s}" for t, s in conditions.items() if earlier.get(t) != s]
        changes.append("status" + (f" ({', '.join(flips)})" if flips else ""))
    return ", ".join(changes)


def _field_paths(fields: Any, prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    """The leaf paths of a managedFields fieldsV1 tree."""
    paths: set[tuple[str, ...]] = set()
    for key, value in (fields or {}).items() if isinstance(fields, dict) else ():
        path = (*prefix, key)
        paths |= _field_paths(value, path) if isinstance(value, dict) and value else {path}
    return paths


def _grew(old: set[tuple[str, ...]], new: set[tuple[str, ...]]) -> bool:
    """True if `new` holds a path that `old` did not own (a path left empty by a loss, such as
    ('f:data',) after losing ('f:data', 'f:a'), is not a gain)."""
    return any(not any(o[: len(path)] == path for o in old) for path in new)


def writer(old: Obj | None, new: Obj) -> str:
    """Who made this write: the field managers whose managedFields entry the write created, re-timed
    or grew. (A manager that only *lost* fields to the writer is not one.) Entries carry whole-second
    times, so comparing fields as well names the writer even when several wrote within one second.
    """

    def entries(obj: Obj | None) -> dict[tuple[str, str, str], Any]:
        managed = (obj or {}).get("metadata", {}).get("managedFields") or []
        return {(m.get("manager", ""), m.get("operation", ""), m.get("subresource", "")): m for m in managed}

    before, after = entries(old), entries(new)
    writers = set()
    for key, entry in after.items():
        previous = before.get(key)
        if previous == entry:
            continue
        if (
            previous is None
            or previous.get("time") != entry.get("time")
            or _grew(_field_paths(previous.get("fieldsV1")), _field_paths(entry.get("fieldsV1")))
        ):
            writers.add(key[0])
    return ",".join(sorted(writers))


def entries_from_events(events: list[Obj], start: datetime, end: datetime) -> list[TimelineEntry]:
    """Kubernetes Events (core/v1 shape, which also shows events.k8s.io ones) within [start, end].

    An Event may carry eventTime (microseconds) or only first/lastTimestamp (seconds), so the window
    is widened to whole seconds for the latter.
    """
    entries = []
    for event in events:
        precise = parse_time(event.get("eventTime"))
        when = (
            precise
            or parse_time(event.get("lastTimestamp") or event.get("firstTimestamp"))
            or parse_time(event.get("metadata", {}).get("creationTimestamp"))
        )
        if when is None:
            continue
        low = start if precise else start.replace(microsecond=0)
        if not low <= when <= end:
            continue
        involved = event.get("involvedObject") or event.get("regarding") or {}
        source = event.get("reportingComponent") or (event.get("source") or {}).get("component", "")
        entries.append(
            TimelineEntry(
                when,
                "event",
                str(involved.get("kind", "")),
                str(involved.get("name", "")),
                str(event.get("reason", "")),
                str(event.get("message") or event.get("note") or ""),
                str(source),
                precise is not None,
            )
        )
    return entries


class WatchRecorder:
    """Watches some kinds in one namespace on a private event loop (:class:`krmcourse.background.LoopThread`),
    and keeps every event with the time it arrived. start() returns once every watch is open."""

    def __init__(self, kubeconfig: Path, namespace: str, kinds: list[str]) -> None:
        if not kinds:
            raise ValueError("name at least one kind to watch, e.g. ['configmaps']")
        self.kubeconfig, self.namespace, self.kinds = kubeconfig, namespace, kinds
        self.entries: list[TimelineEntry] = []
        self._thread = LoopThread("watch-recorder")

    def start(self, timeout: float = 30) -> None:
        try:
            self._thread.start(self._main, timeout)
        except RuntimeError as error:
            raise RuntimeError(f"could not watch {self.kinds} in {self.namespace!r}: {error.__cause__ or error}") \
                from error.__cause__

    def stop(self) -> None:
        self._thread.stop()

    async def _main(self, ready: Callable[[], None]) -> None:
        import kr8s.asyncio

        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Kubernetes version .* is not supported")
            api = await kr8s.asyncio.api(kubeconfig=str(self.kubeconfig))
        opened = [asyncio.Event() for _ in self.kinds]
        tasks = [asyncio.create_task(self._watch(api, kind, ev)) for kind, ev in zip(self.kinds, opened, strict=True)]
        waiter = asyncio.gather(*(ev.wait() for ev in opened))
        try:
            first: list[asyncio.Future[Any]] = [waiter, *tasks]
            done, _ = await asyncio.wait(first, return_when=asyncio.FIRST_COMPLETED)
            for task in tasks:
                if task in done and (error := task.exception()) is not None:
                    raise error
            ready()
            await asyncio.gather(*tasks)
        finally:
            waiter.cancel()
            for task in tasks:
                task.cancel()
            if api._session is not None:
                await api._session.aclose()

    async def _watch(self, api: Any, kind: str, opened: asyncio.Event) -> None:
        res = await controllerkit.lookup(api, kind)
        last: dict[str, Obj] = {}
        async for change, obj in controllerkit.list_then_watch(controllerkit.Client(api), res, self.namespace):
            if change == "LIST":  # what was there before: changes are described against it
                last = {i["metadata"]["uid"]: i for i in obj.get("items") or []}
                opened.set()
                continue
            uid = obj["metadata"]["uid"]
            previous = last.get(uid)
            detail = describe_change(previous, obj) if change == "MODIFIED" else ""
            by = writer(previous, obj) if change != "DELETED" else ""
            last[uid] = obj
            self.entries.append(
                TimelineEntry(datetime.now(UTC), "watch", obj.get("kind") or res.plural,
                              obj["metadata"]["name"], change, detail, by)
            )


def _offset(entry: TimelineEntry, start: datetime) -> str:
    """Seconds since the block started; whole-second Events are marked approximate (~)."""
    seconds = (entry.time - start).total_seconds()
    return f"+{seconds:.3f}s" if entry.precise else f"~+{max(seconds, 0):.0f}s"


class EventTimeline:
    """Record a namespace while a `with` block runs; then show what happened, in order."""

    def __init__(self, cluster: Cluster, namespace: str, kinds: list[str] | None = None, settle: float = 1.0) -> None:
        self.cluster, self.namespace = cluster, namespace
        self.kinds = kinds or []
        self.settle = settle
        self.start: datetime | None = None
        self.end: datetime | None = None
        self.entries: list[TimelineEntry] = []
        self._recorder: WatchRecorder | None = None

    def __enter__(self) -> EventTimeline:
        if self.kinds:
            self._recorder = WatchRecorder(self.cluster.kubeconfig, self.namespace, self.kinds)
            self._recorder.start()
        self.start = datetime.now(UTC)
        return self

    def __exit__(self, *exc: object) -> None:
        time.sleep(self.settle)  # let the last writes of a controller arrive
        self.end = datetime.now(UTC)
        if self._recorder is not None:
            self._recorder.stop()
        assert self.start is not None
        events = self.cluster.objects("events", self.namespace)
        watched = [e for e in (self._recorder.entries if self._recorder else []) if e.time >= self.start]
        self.entries = sorted(watched + entries_from_events(events, self.start, self.end))

    def rows(self) -> list[dict[str, str]]:
        """The entries as rows with the time relative to the start of the block."""
        assert self.start is not None
        return [
            {
                "t": _offset(e, self.start),
                "source": e.source,
                "object": f"{e.kind}/{e.name}",
                "what": e.what,
                "detail": e.detail,
                "by": e.by,
            }
            for e in self.entries
        ]

    def __str__(self) -> str:
        return "\n".join(
            f"{r['t']:>9} {r['source']:<5} {r['object']:<28} {r['what']:<18} {r['detail']}"
            + (f" [{r['by']}]" if r["by"] else "")
            for r in self.rows()
        )

    def __repr__(self) -> str:
        return str(self) if self.entries else f"<EventTimeline {self.namespace}: nothing recorded>"

    def _repr_html_(self) -> str:
        head = "".join(
            f"<th style='text-align:left'>{h}</th>" for h in ("t", "source", "object", "what", "detail", "by")
        )
        body = "".join(
            "<tr>" + "".join(f"<td style='text-align:left'>{html.escape(v)}</td>" for v in r.values()) + "</tr>"
            for r in self.rows()
        )
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    def widget(self) -> Any:
        import ipywidgets

        return ipywidgets.HTML(self._repr_html_())
