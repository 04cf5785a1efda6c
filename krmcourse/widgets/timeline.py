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
import json
import threading
import time
import warnings
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

Obj = dict[str, Any]

# Fields that change on every write and say nothing about what a controller did.
_NOISE = {"resourceVersion", "managedFields", "generation"}


class Cluster(Protocol):
    """What the timeline needs from a cluster, as a :class:`krmcourse.Lab` provides it."""

    @property
    def kubeconfig(self) -> Path: ...

    def kubectl(self, *args: str) -> str: ...


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
    """Watches some kinds in one namespace from a private thread and event loop, and keeps every
    event with the time it arrived. start() returns once every watch is open."""

    def __init__(self, kubeconfig: Path, namespace: str, kinds: list[str]) -> None:
        if not kinds:
            raise ValueError("name at least one kind to watch, e.g. ['configmaps']")
        self.kubeconfig, self.namespace, self.kinds = kubeconfig, namespace, kinds
        self.entries: list[TimelineEntry] = []
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self, timeout: float = 30) -> None:
        self._thread = threading.Thread(target=self._run, name="watch-recorder", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout) or self._error is not None:
            self.stop()
            raise RuntimeError(f"could not watch {self.kinds} in {self.namespace!r}: {self._error}")

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(_cancel_all)
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as error:  # noqa: BLE001 - reported to start(); the thread must not die loudly
            self._error = error
            self._ready.set()

    async def _main(self) -> None:
        import kr8s.asyncio

        self._loop = asyncio.get_running_loop()
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Kubernetes version .* is not supported")
            api = await kr8s.asyncio.api(kubeconfig=str(self.kubeconfig))
        opened = [asyncio.Event() for _ in self.kinds]
        tasks = [asyncio.create_task(self._watch(api, kind, ev)) for kind, ev in zip(self.kinds, opened, strict=True)]
        try:
            waiter = asyncio.gather(*(ev.wait() for ev in opened))
            first: list[asyncio.Future[Any]] = [waiter, *tasks]
            done, _ = await asyncio.wait(first, return_when=asyncio.FIRST_COMPLETED)
            for task in tasks:
                if task in done and (error := task.exception()) is not None:
                    raise error
            self._ready.set()
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            if api._session is not None:
                await api._session.aclose()

    async def _watch(self, api: Any, kind: str, opened: asyncio.Event) -> None:
        singular, plural, _ = await api.async_lookup_kind(kind)
        version = singular.split("/", 1)[1] if "/" in singular.split(".")[0] else singular.split(".", 1)[1]
        async with api.call_api("GET", version=version, url=plural, namespace=self.namespace) as response:
            listing = response.json()
        last: dict[str, Obj] = {i["metadata"]["uid"]: i for i in listing.get("items", [])}
        label = listing.get("kind", "List").removesuffix("List") or plural
        params = {"watch": "true", "resourceVersion": listing["metadata"]["resourceVersion"]}
        async with api.call_api(
            "GET", version=version, url=plural, namespace=self.namespace, params=params, stream=True, timeout=None
        ) as response:
            opened.set()
            async for line in response.aiter_lines():
                if not line.strip():
                    continue
                event = json.loads(line)
                obj = event["object"]
                if event["type"] not in ("ADDED", "MODIFIED", "DELETED"):
                    continue
                uid = obj["metadata"]["uid"]
                previous = last.get(uid)
                detail = describe_change(previous, obj) if event["type"] == "MODIFIED" else ""
                by = writer(previous, obj) if event["type"] != "DELETED" else ""
                last[uid] = obj
                self.entries.append(
                    TimelineEntry(
                        datetime.now(UTC),
                        "watch",
                        obj.get("kind", label),
                        obj["metadata"]["name"],
                        event["type"],
                        detail,
                        by,
                    )
                )


def _offset(entry: TimelineEntry, start: datetime) -> str:
    """Seconds since the block started; whole-second Events are marked approximate (~)."""
    seconds = (entry.time - start).total_seconds()
    return f"+{seconds:.3f}s" if entry.precise else f"~+{max(seconds, 0):.0f}s"


def _cancel_all() -> None:
    """Runs inside the recorder's loop: cancelling every task there ends asyncio.run()."""
    for task in asyncio.all_tasks():
        task.cancel()


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
        events = json.loads(self.cluster.kubectl("get", "events", "-n", self.namespace, "-o", "json"))
        watched = [e for e in (self._recorder.entries if self._recorder else []) if e.time >= self.start]
        self.entries = sorted(watched + entries_from_events(events.get("items", []), self.start, self.end))

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
