"""Measure the load a controller puts on the API server, and what it costs the controller itself.

Part V of the course makes claims such as "a watch costs fewer requests than polling" or "a
metadata-only cache holds a fraction of the bytes". A claim like that is only worth teaching if the
learner sees the numbers come out of a real API server. This module reads two sources and nothing
else:

- kube-apiserver's own ``/metrics`` (``lab.metrics()``): requests by verb and resource, the watches
  open right now, response bytes and watch events;
- a controller's own Prometheus endpoint (prometheus-client inside the controller process), and the
  controller process's memory as the kernel reports it.

A measurement is always a difference between two scrapes taken around the work, so the cluster's
background traffic on other resources (leases, nodes, events) does not blur it.

>>> with measure(lab, "widgets", "configmaps") as load:
...     do_some_work()
>>> load.requests(verb="LIST", resource="widgets")
1
"""

from __future__ import annotations

import json
import math
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import httpx
import psutil

from .credentials import connection
from .errors import KrmcourseError

if TYPE_CHECKING:  # pandas and matplotlib load slowly; only the functions that draw need them
    import pandas as pd
    from matplotlib.figure import Figure

#: The kube-apiserver families this module reads. Everything else in /metrics is skipped while
#: parsing, which keeps a scrape of a few megabytes fast.
APISERVER_FAMILIES = (
    "apiserver_request_total",
    "apiserver_longrunning_requests",
    "apiserver_response_sizes_sum",
    "apiserver_response_sizes_count",
    "apiserver_watch_events_total",
    "apiserver_watch_events_sizes_sum",
    "apiserver_request_body_size_bytes_sum",
)

SSA = "application/apply-patch+yaml"
MERGE = "application/merge-patch+json"

#: Our controllers print this line once their metrics endpoint listens (see ``metrics_url``).
METRICS_LINE = re.compile(r"metrics: (http://127\.0\.0\.1:\d+/metrics)")

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')

Labels = frozenset[tuple[str, str]]
Match = str | Iterable[str] | Callable[[str], bool] | None


def _unescape(value: str) -> str:
    return value.replace("\\n", "\n").replace('\\"', '"').replace("\\\\", "\\")


def _matches(have: str, want: Match) -> bool:
    if want is None:
        return True
    if isinstance(want, str):
        return have == want
    if callable(want):
        return bool(want(have))
    return have in set(want)


@dataclass(frozen=True)
class Metrics:
    """One scrape of a Prometheus text endpoint: ``(name, labels) -> value``.

    Subtracting an earlier scrape from a later one gives what happened in between, which is how every
    comparison in Part V is made.
    """

    samples: Mapping[tuple[str, Labels], float]
    taken_at: float = field(default_factory=time.time)

    @classmethod
    def parse(cls, text: str, families: Iterable[str] | None = None) -> Metrics:
        """Parse Prometheus text format, keeping only the named families (all when None)."""
        wanted = tuple(families) if families is not None else None
        samples: dict[tuple[str, Labels], float] = {}
        for line in text.splitlines():
            if not line or line.startswith("#"):
                continue
            if wanted is not None and not line.startswith(wanted):
                continue
            found = _SAMPLE.match(line)
            if found is None:
                continue
            name, raw_labels, raw_value = found.groups()
            if wanted is not None and name not in wanted:
                continue
            labels = frozenset((k, _unescape(v)) for k, v in _LABEL.findall(raw_labels or ""))
            try:
                samples[(name, labels)] = float(raw_value)
            except ValueError:
                continue
        return cls(samples)

    def names(self) -> set[str]:
        return {name for name, _ in self.samples}

    def series(self, name: str, **match: Match) -> Iterator[tuple[dict[str, str], float]]:
        """Every sample of ``name`` whose labels match (a value, a set of values, or a predicate)."""
        for (sample_name, labels), value in self.samples.items():
            if sample_name != name:
                continue
            as_dict = dict(labels)
            if all(_matches(as_dict.get(key, ""), want) for key, want in match.items()):
                yield as_dict, value

    def total(self, name: str, **match: Match) -> float:
        """The sum over every matching sample of ``name`` (0 when there is none)."""
        return sum(value for _, value in self.series(name, **match))

    def by(self, name: str, *keys: str, **match: Match) -> dict[tuple[str, ...], float]:
        """Matching samples of ``name`` summed per combination of the label ``keys``."""
        out: dict[tuple[str, ...], float] = {}
        for labels, value in self.series(name, **match):
            group = tuple(labels.get(key, "") for key in keys)
            out[group] = out.get(group, 0.0) + value
        return out

    def __sub__(self, earlier: Metrics) -> Metrics:
        """Counters after minus before. Series that did not exist before count from zero."""
        diff = {key: value - earlier.samples.get(key, 0.0) for key, value in self.samples.items()}
        return Metrics(diff, self.taken_at)


def scrape_apiserver(lab: Any) -> Metrics:
    """The families of :data:`APISERVER_FAMILIES` from the lab's kube-apiserver, right now."""
    return Metrics.parse(lab.metrics(), APISERVER_FAMILIES)


def scrape(url: str, families: Iterable[str] | None = None, timeout: float = 5.0) -> Metrics:
    """Scrape a controller's own Prometheus endpoint (plain http on 127.0.0.1)."""
    try:
        response = httpx.get(url, timeout=timeout)
        response.raise_for_status()
    except httpx.HTTPError as exc:
        raise KrmcourseError(f"Could not scrape {url}: {exc}",
                             "Is the controller still running? Look at its logs with proc.logs().") from exc
    return Metrics.parse(response.text, families)


def running_metrics_url(lab: Any, name: str) -> str | None:
    """The metrics URL of the lab's process ``name`` (see :meth:`krmcourse.Lab.start`), or None when it
    does not run or has not printed one. Its log grows with every start, so the last URL is the running one's."""
    if name not in lab.running():
        return None
    found = METRICS_LINE.findall(lab.logs(name, lines=10**6))
    return found[-1] if found else None


def metrics_url(proc: Any, timeout: float = 20.0) -> str:
    """Wait until a controller prints ``metrics: http://127.0.0.1:PORT/metrics`` and return the URL.

    Our controllers bind their metrics endpoint to port 0 and print the port the kernel chose, so
    two controllers never race for a port.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = METRICS_LINE.search(proc.logs())
        if found:
            return found.group(1)
        if not proc.alive:
            break
        time.sleep(0.1)
    raise KrmcourseError("The controller did not print its metrics URL.",
                         "Read its output with proc.logs(); it may have failed at start-up.\n"
                         + proc.logs()[-2000:])


def rss_bytes(pid: int) -> int:
    """Resident memory of a process, as the kernel counts it."""
    return int(psutil.Process(pid).memory_info().rss)


def rss_mib(pids: Iterable[int]) -> float:
    """Resident memory of several processes, summed, in MiB; a process that has gone counts nothing."""
    total = 0
    for pid in pids:
        try:
            total += rss_bytes(pid)
        except psutil.Error:
            pass
    return total / 2**20


@dataclass
class ApiLoad:
    """What kube-apiserver saw between two scrapes, limited to some resources.

    ``open_watches`` is a gauge, sampled while the work ran (see :meth:`sample_watches`); all the
    other figures are counter differences.
    """

    resources: tuple[str, ...]
    minus_requests: dict[tuple[str, str, str], float] = field(default_factory=dict)
    minus_bytes: dict[tuple[str, str, str], float] = field(default_factory=dict)
    delta: Metrics | None = None
    open_watches: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def _need(self) -> Metrics:
        if self.delta is None:
            raise KrmcourseError("This measurement has not finished yet.",
                                 "Read its figures after the `with measure(...)` block.")
        return self.delta

    def _resource(self, resource: Match) -> Match:
        return resource if resource is not None else self.resources

    def _kept(self, name: str, verb: Match, resource: Match, subresource: Match,
              minus: Mapping[tuple[str, str, str], float]) -> float:
        total = 0.0
        for labels, value in self._need().series(name, verb=verb, resource=self._resource(resource),
                                                 subresource=subresource):
            key = (labels.get("verb", ""), labels.get("resource", ""), labels.get("subresource", ""))
            total += value
            if key in minus:  # take the observer's own share off once per series
                total -= minus[key]
                minus = {k: v for k, v in minus.items() if k != key}
        return max(total, 0.0)

    def requests(self, verb: Match = None, resource: Match = None, subresource: Match = None) -> int:
        """Requests that completed, by verb (GET, LIST, WATCH, POST, PUT, PATCH, APPLY, DELETE).

        A WATCH is counted when it ends, so stop a controller inside the block to count its watches.
        The observer's own requests (see :func:`measure`) are left out.
        """
        return round(self._kept("apiserver_request_total", verb, resource, subresource, self.minus_requests))

    def by_verb(self) -> pd.DataFrame:
        """A table of requests per verb, resource and subresource, largest first."""
        import pandas as pd

        rows = self._need().by("apiserver_request_total", "verb", "resource", "subresource",
                               resource=self.resources)
        kept = {(verb, resource, sub): count - self.minus_requests.get((verb, resource, sub), 0)
                for (verb, resource, sub), count in rows.items()}
        frame = pd.DataFrame([(*key, round(count)) for key, count in kept.items() if round(count) > 0],
                             columns=["verb", "resource", "subresource", "requests"])
        return frame.sort_values("requests", ascending=False, ignore_index=True)

    def response_bytes(self, verb: Match = None, resource: Match = None) -> int:
        """Bytes of response bodies the API server wrote, gzip-compressed when it compressed them.

        Watch streams are not included; see :meth:`watch_event_bytes`.
        """
        return round(self._kept("apiserver_response_sizes_sum", verb, resource, None, self.minus_bytes))

    def watch_events(self, resource: Match = None) -> int:
        """Watch events the API server sent, to every watcher of these resources."""
        return round(self._need().total("apiserver_watch_events_total", resource=self._resource(resource)))

    def watch_event_bytes(self, resource: Match = None) -> int:
        """Bytes of watch events the API server sent, summed over every watcher."""
        return round(self._need().total("apiserver_watch_events_sizes_sum",
                                        resource=self._resource(resource)))

    def sample_watches(self, lab: Any) -> dict[str, int]:
        """Record the watches open right now on each resource, keeping the highest value seen."""
        now = open_watches(lab, *self.resources)
        for resource, count in now.items():
            self.open_watches[resource] = max(self.open_watches.get(resource, 0), count)
        return now


def open_watches(lab: Any, *resources: str) -> dict[str, int]:
    """Watches open on the lab's API server right now, per resource (from apiserver_longrunning_requests).

    Controllers are not the only watchers: kube-controller-manager watches most resources too, so
    compare against a value taken before, never against zero.
    """
    gauges = scrape_apiserver(lab)
    return {res: round(gauges.total("apiserver_longrunning_requests", verb="WATCH", resource=res))
            for res in resources}


class RestClient:
    """A small synchronous HTTP client for one cluster, built from a kubeconfig, that counts itself.

    Notebooks use it where the exact request matters (which verb, which content type, how many
    bytes): kubectl would add discovery requests and hide the status codes. It counts its requests
    and response bytes under the same ``(verb, resource, subresource)`` keys kube-apiserver uses, so
    it can be passed to :func:`measure` as the ``observer`` whose own share is left out.

    >>> rest = RestClient(lab.kubeconfig)
    >>> rest.ok("GET", "/api/v1/namespaces/default/configmaps")["kind"]
    'ConfigMapList'
    """

    def __init__(self, kubeconfig: Path) -> None:
        conn = connection(kubeconfig)
        self.server = conn.server
        self.http = httpx.Client(base_url=self.server, verify=conn.tls, headers=conn.headers, timeout=30)
        self.sent = 0
        self.received = 0
        self.request_counts: Counter[tuple[str, str, str]] = Counter()
        self.byte_counts: Counter[tuple[str, str, str]] = Counter()

    def call(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
             params: dict[str, str] | None = None, accept: str | None = None) -> httpx.Response:
        """One request; returns the response whatever its status (check ``.status_code``)."""
        content = None if body is None else (body if isinstance(body, str) else json.dumps(body))
        headers = {"Content-Type": content_type}
        if accept:
            headers["Accept"] = accept
        response = self.http.request(method, path, content=content, params=params, headers=headers)
        key = metric_key(method, path, content_type, params)
        self.request_counts[key] += 1
        self.byte_counts[key] += len(response.content)
        self.sent += len(content or "")
        self.received += len(response.content)
        return response

    def ok(self, method: str, path: str, body: Any = None, **kwargs: Any) -> dict[str, Any]:
        """Like call(), but a failure raises with the API server's own message."""
        response = self.call(method, path, body, **kwargs)
        if response.status_code >= 400:
            raise KrmcourseError(f"{method} {path} answered {response.status_code}: {message(response)}",
                                 "Read the API server's message above.")
        return dict(response.json()) if response.content else {}

    def close(self) -> None:
        self.http.close()


def metric_key(method: str, path: str, content_type: str,
               params: dict[str, str] | None) -> tuple[str, str, str]:
    """The (verb, resource, subresource) under which kube-apiserver's metrics count this request."""
    parts = [p for p in path.split("?")[0].split("/") if p]
    rest = parts[2:] if parts[:1] == ["api"] else parts[3:]
    if rest[:1] == ["namespaces"] and len(rest) > 2:
        rest = rest[2:]
    resource, name, sub = (rest + ["", "", ""])[:3]
    verb = method.upper()
    if verb == "GET":
        verb = "WATCH" if (params or {}).get("watch") == "true" else ("GET" if name else "LIST")
    elif verb == "PATCH" and content_type == SSA:
        verb = "APPLY"
    return verb, resource, sub


def message(response: httpx.Response) -> str:
    try:
        return str(response.json().get("message", response.text))
    except ValueError:
        return response.text


class Observer(Protocol):
    """A client that counts its own requests, so a measurement can leave them out.

    The notebook's own requests (creating objects, checking that a controller converged) hit the
    same resources as the controller under test; subtracting them keeps the figures honest.
    """

    request_counts: Mapping[tuple[str, str, str], int]
    byte_counts: Mapping[tuple[str, str, str], int]


@contextmanager
def measure(lab: Any, *resources: str, observer: Observer | None = None) -> Iterator[ApiLoad]:
    """Scrape kube-apiserver before and after the block; the yielded ApiLoad holds the difference.

    With ``observer``, the requests that client made during the block, counted by
    ``(verb, resource, subresource)``, are subtracted from every figure.
    """
    if not resources:
        raise KrmcourseError("measure() needs at least one resource, for example measure(lab, 'widgets').",
                             "Name the plural resources your controller touches.")
    load = ApiLoad(tuple(resources))
    own_requests = dict(observer.request_counts) if observer else {}
    own_bytes = dict(observer.byte_counts) if observer else {}
    before = scrape_apiserver(lab)
    started = time.monotonic()
    yield load
    load.seconds = time.monotonic() - started
    load.delta = scrape_apiserver(lab) - before
    if observer is not None:
        load.minus_requests = {k: v - own_requests.get(k, 0) for k, v in observer.request_counts.items()
                               if v - own_requests.get(k, 0)}
        load.minus_bytes = {k: v - own_bytes.get(k, 0) for k, v in observer.byte_counts.items()
                            if v - own_bytes.get(k, 0)}


def ratio(worse: float, better: float) -> float:
    """How many times more the worse variant used; a variant that used nothing counts as 1."""
    if worse < 0 or better < 0:
        raise ValueError(f"ratio() needs counts, got {worse} and {better}")
    return worse / max(better, 1)


#: What :func:`expect` tells a learner when a comparison of seconds, or of memory, misses.
TIME_BLURS = ("Seconds depend on the rest of the machine: a laptop saving its battery, or a server shared by a "
              "room, runs everything slower and less evenly, and that can blur a comparison of two timings. The "
              "counts and bytes above do not depend on it; on a quieter machine the difference in time shows too.")
MEMORY_BLURS = ("A process's memory as the system counts it (the pages it holds) depends on the rest of the machine "
                "too: a machine short of memory takes pages back, and Go and Python return memory lazily. The "
                "counts and bytes above do not depend on it; on a quieter machine the difference in memory shows too.")


def expect(holds: bool, claim: str, measured: str, otherwise: str) -> bool:
    """Report a claim about speed or memory, measured side by side in one run, without stopping the notebook.

    Counts of requests, objects and bytes come out the same on any machine, and a notebook asserts them.
    Seconds and memory do not: a laptop on battery, or a server shared by a room, can blur a comparison
    that a quiet machine shows plainly. So the notebook states the claim with its margin (``claim``),
    compares the two figures it measured (``holds``), and prints what it found; when the comparison
    misses, it says what was measured and why a machine can show that (``otherwise``), and goes on.

    >>> expect(12.0 > 5 * 1.5, "a full list takes over 5 times as long as an empty one",
    ...        "1.5 ms, then 12.0 ms", "A busy machine blurs timings.")
    a full list takes over 5 times as long as an empty one: yes (1.5 ms, then 12.0 ms).
    True
    """
    if holds:
        print(f"{claim}: yes ({measured}).")
    else:
        print(f"{claim}: not on this run ({measured}). {otherwise}")
    return bool(holds)


def table(rows: Mapping[str, Mapping[str, float]]) -> pd.DataFrame:
    """One row per variant, one column per measure, in the order given."""
    import pandas as pd

    return pd.DataFrame.from_dict({name: dict(values) for name, values in rows.items()}, orient="index")


def plot(frame: pd.DataFrame, columns: Iterable[str] | None = None, title: str = "") -> Figure:
    """One small bar chart per measure, variants side by side, so each measure keeps its own scale."""
    import matplotlib.pyplot as plt

    cols = list(columns) if columns is not None else list(frame.columns)
    width = max(3.0, 2.6 * len(cols))
    fig, axes = plt.subplots(1, len(cols), figsize=(width, 2.8), squeeze=False)
    for ax, col in zip(axes[0], cols, strict=True):
        values = frame[col].astype(float)
        bars = ax.bar([str(i) for i in frame.index], values, color="#4c72b0")
        ax.set_title(col, fontsize=9)
        ax.tick_params(axis="x", labelrotation=20, labelsize=8)
        ax.tick_params(axis="y", labelsize=8)
        for bar, value in zip(bars, values, strict=True):
            label = f"{value:.0f}" if math.isfinite(value) and value >= 10 else f"{value:.2g}"
            ax.annotate(label, (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center",
                        va="bottom", fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    plt.close(fig)  # the notebook shows the returned figure once, not again when the cell ends
    return fig


@dataclass
class Comparison:
    """Variants of one experiment side by side: a table (one row per variant) and the loads behind it."""

    title: str
    table: pd.DataFrame
    loads: dict[str, ApiLoad] = field(default_factory=dict)

    def ratio(self, measure: str, worse: str, better: str) -> float:
        """How many times more of ``measure`` the ``worse`` variant used than the ``better`` one."""
        return round(ratio(float(self.table.loc[worse, measure]), float(self.table.loc[better, measure])), 1)

    def plot(self, *columns: str) -> Figure:
        return plot(self.table, columns or None, self.title)

    def _repr_html_(self) -> str:
        return f"<b>{self.title}</b>" + str(self.table._repr_html_())

    def __repr__(self) -> str:
        return f"{self.title}\n{self.table}"


@dataclass
class MeteredProcess:
    """A running controller that serves its own Prometheus metrics."""

    proc: Any
    url: str

    def metrics(self) -> Metrics:
        return scrape(self.url)

    def rss(self) -> int:
        return rss_bytes(int(self.proc.pid))

    def stop(self) -> None:
        self.proc.stop()


def start_metered(lab: Any, script: Path, *args: str, name: str | None = None, ready: str = "synced",
                  timeout: float = 30) -> MeteredProcess:
    """Run a controller script with ``lab.run_controller``, wait for its metrics URL and for ``ready`` in its log."""
    proc = lab.run_controller(script, *args, name=name)
    url = metrics_url(proc, timeout=timeout)
    proc.wait_for_log(ready, timeout=timeout)
    return MeteredProcess(proc, url)


def mib(n: float) -> float:
    """Bytes to MiB, rounded for a table."""
    return round(n / 2**20, 2)
