"""The plumbing behind notebook 32: workloads, controller runs, and side-by-side measurements.

Every comparison here runs each variant of a controller on the same workload, one after the other,
against the lab's real API server, and reads the figures from kube-apiserver's /metrics, from the
controller's own /metrics, and from the kernel (process memory). Nothing is estimated.

Each variant works on its own set of widgets, told apart by the label ``citizens.krmcourse.dev/run``,
and the controllers select their widgets with that label on the server, so one run never sees the
objects of another.
"""

from __future__ import annotations

import os
import time
import warnings
from pathlib import Path
from typing import Any

from krmcourse import apiload
from krmcourse.apiload import MERGE, SSA, RestClient, message  # noqa: F401 - re-exported for the notebook

warnings.filterwarnings("ignore", message="Kubernetes version .* is not supported")

HERE = Path(__file__).resolve().parent
CONTROLLERS = HERE / "controllers"
NS = "citizens"
GROUP = "citizens.krmcourse.dev"
RUN = f"{GROUP}/run"
WIDGETS = f"/apis/{GROUP}/v1/namespaces/{NS}/widgets"
CONFIGMAPS = f"/api/v1/namespaces/{NS}/configmaps"


# --------------------------------------------------------------------------- widgets and workloads
def widget(name: str, run: str, size: int = 1, color: str = "grey", expire: int | None = None) -> dict:
    spec: dict[str, Any] = {"size": size, "color": color}
    if expire is not None:
        spec["expireAfterSeconds"] = expire
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Widget",
        "metadata": {"name": name, "namespace": NS, "labels": {RUN: run}},
        "spec": spec,
    }


def run_id(prefix: str) -> str:
    """A fresh run label, so that running a notebook cell twice never meets the widgets of the first run."""
    return f"{prefix}-{os.urandom(2).hex()}"


def make_widgets(rest: RestClient, run: str, n: int, expire_first: int | None = None) -> list[str]:
    """Create ``n`` widgets for one run (the first may expire after ``expire_first`` seconds)."""
    colors = ("red", "green", "blue")
    names = [f"{run}-{i}" for i in range(n)]
    for i, name in enumerate(names):
        rest.ok(
            "POST",
            WIDGETS,
            widget(name, run, size=i, color=colors[i % 3], expire=expire_first if i == 0 else None),
        )
    return names


def change_sizes(rest: RestClient, names: list[str], changes: int, interval: float) -> None:
    """The workload: ``changes`` spec edits spread over time, round-robin over the widgets."""
    for i in range(changes):
        rest.ok(
            "PATCH", f"{WIDGETS}/{names[i % len(names)]}", {"spec": {"size": 100 + i}}, content_type=MERGE
        )
        time.sleep(interval)


def children_match(rest: RestClient, run: str) -> bool:
    """True when every widget of the run has a ConfigMap holding its current size, and a current status."""
    widgets = rest.ok("GET", WIDGETS, params={"labelSelector": f"{RUN}={run}"}).get("items") or []
    maps = rest.ok("GET", CONFIGMAPS, params={"labelSelector": f"{RUN}={run}"}).get("items") or []
    sizes = {m["metadata"]["name"]: m.get("data", {}).get("size") for m in maps}
    return all(
        sizes.get(f"{w['metadata']['name']}-widget") == str(w["spec"]["size"])
        and (w.get("status") or {}).get("observedGeneration") == w["metadata"]["generation"]
        for w in widgets
    )


def expired(rest: RestClient, name: str) -> bool:
    """Whether the controller has marked the widget Expired (its Ready condition says so)."""
    conditions = (rest.ok("GET", f"{WIDGETS}/{name}").get("status") or {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["reason"] == "Expired" for c in conditions)


def settle(lab: Any, rest: RestClient, run: str, quiet: float = 1.0) -> None:
    """Wait until the controller has converged, then a little longer for the echoes of its own writes."""
    lab.wait_until(lambda: children_match(rest, run), timeout=30, message="the controller did not converge")
    time.sleep(quiet)


# --------------------------------------------------------------------------- controllers
Comparison = apiload.Comparison


def start_widgets(lab: Any, run: str, *flags: str, name: str | None = None) -> apiload.MeteredProcess:
    """Start the Widget controller for one run's widgets and wait until its cache is synced."""
    return apiload.start_metered(lab, CONTROLLERS / "widgetctl.py", "--selector", f"{RUN}={run}", *flags,
                                 name=name or f"widgetctl-{run}")


def _own(metrics: apiload.Metrics, name: str, **match: Any) -> int:
    return round(metrics.total(name, **match))


def quiet_metrics(ctl: apiload.MeteredProcess, counter: str = "controller_api_requests_total",
                  timeout: float = 15, quiet: float = 0.4) -> apiload.Metrics:
    """The controller's metrics once ``counter`` has not moved for ``quiet`` seconds (nothing in flight)."""
    deadline = time.monotonic() + timeout
    last = ctl.metrics()
    while time.monotonic() < deadline:
        time.sleep(quiet)
        now = ctl.metrics()
        if now.total(counter) == last.total(counter):
            return now
        last = now
    return last


def compare_first_line(lab: Any, rest: RestClient, n: int = 10) -> Any:
    """G1: the controller's own request counter next to kube-apiserver's, for the same run."""
    import pandas as pd

    run = run_id("g1")
    names = make_widgets(rest, run, n)
    with apiload.measure(lab, "widgets", "configmaps", observer=rest) as load:
        ctl = start_widgets(lab, run)
        change_sizes(rest, names, 3, 0.2)
        settle(lab, rest, run, quiet=0.5)
        own = quiet_metrics(ctl)
        ctl.stop()
    rows = []
    for (verb, resource, sub), count in sorted(
        own.by("controller_api_requests_total", "verb", "resource", "subresource").items()
    ):
        rows.append(
            {
                "verb": verb,
                "resource": resource + (f"/{sub}" if sub else ""),
                "controller says": round(count),
                "kube-apiserver says": load.requests(verb=verb, resource=resource, subresource=sub),
            }
        )
    return pd.DataFrame(rows)


def compare_poll_watch(
    lab: Any, rest: RestClient, n: int = 20, changes: int = 6, window: float = 6.0, poll: float = 0.5
) -> Comparison:
    """G2: the same controller learning about widgets by polling (a LIST every ``poll`` s) or by watching.

    The same ``changes`` arrive over ``window`` seconds, and both variants watch their ConfigMaps, so the
    only difference is how they observe widgets. The polling variant runs until it has polled as often
    as ``window`` allows on a quiet machine (``window / poll`` LISTs), however long that takes here, and
    the watching variant then runs for the same time: the counts are the same on a slow machine.
    """
    rows, loads = {}, {}
    polls, used = round(window / poll), window
    for variant, flags in (("polling", ["--poll", str(poll)]), ("watching", [])):
        run = run_id(f"g2-{variant}")
        names = make_widgets(rest, run, n)
        with apiload.measure(lab, "widgets", "configmaps", observer=rest) as load:
            ctl = start_widgets(lab, run, "--watch-children", *flags)
            started = time.monotonic()
            change_sizes(rest, names, changes, window / changes)
            settle(lab, rest, run, quiet=0.5)
            if variant == "polling":
                lab.wait_until(lambda ctl=ctl: _own(ctl.metrics(), "controller_api_requests_total", verb="LIST",
                                                    resource="widgets") >= polls,
                               timeout=polls * poll * 20, interval=poll / 2,
                               message=f"the polling controller never listed widgets {polls} times")
                used = time.monotonic() - started
            else:
                time.sleep(max(0.0, used - (time.monotonic() - started)))
            own = ctl.metrics()
            ctl.stop()
        loads[variant] = load
        observe = load.requests(verb=("LIST", "WATCH"), resource="widgets")
        observe_bytes = load.response_bytes(verb="LIST", resource="widgets") + load.watch_event_bytes(
            "widgets"
        )
        rows[variant] = {
            "requests to observe widgets": observe,
            "KiB to observe widgets": round(observe_bytes / 1024, 1),
            "all requests": load.requests(),
            "reconciles": _own(own, "controller_reconciles_total"),
        }
    return Comparison(
        f"Polling every {poll} s versus watching, {used:.0f} s, {changes} changes",
        apiload.table(rows),
        loads,
    )


def compare_shared_cache(lab: Any, rest: RestClient, n: int = 20, changes: int = 6) -> Comparison:
    """G2: two loops as two processes (two watches) versus one process whose loops share one cache."""
    rows, loads = {}, {}
    layouts = {
        "two processes": [["--loops", "configmap"], ["--loops", "tally"]],
        "one shared cache": [["--loops", "configmap,tally"]],
    }
    # kube-controller-manager's garbage collector finds new CRDs by polling discovery every 30 s, then
    # opens a watch of its own on them. Wait for that watch first, or it may land inside one variant's
    # window and be counted as that variant's.
    lab.wait_until(lambda: apiload.open_watches(lab, "widgets")["widgets"] >= 1, timeout=90, interval=1,
                   message="kube-controller-manager never started watching widgets")
    for variant, processes in layouts.items():
        run = run_id("g2-" + variant.split()[0])
        names = make_widgets(rest, run, n)
        before = apiload.open_watches(lab, "widgets")["widgets"]
        with apiload.measure(lab, "widgets", "configmaps", observer=rest) as load:
            ctls = [
                start_widgets(lab, run, *flags, name=f"widgetctl-{run}-{i}")
                for i, flags in enumerate(processes)
            ]
            # Count only once every process has opened its watch; a loaded machine can be slow to.
            want = before + len(processes)
            lab.wait_until(
                lambda want=want: apiload.open_watches(lab, "widgets")["widgets"] >= want,
                timeout=30, interval=0.2, message="the controllers never opened their watches",
            )
            change_sizes(rest, names, changes, 0.3)
            settle(lab, rest, run, quiet=0.5)
            watching = load.sample_watches(lab)["widgets"] - before
            rss = sum(c.rss() for c in ctls)
            for c in ctls:
                c.stop()
        loads[variant] = load
        rows[variant] = {
            "watches on widgets": watching,
            "LIST+WATCH widgets": load.requests(verb=("LIST", "WATCH"), resource="widgets"),
            "watch events sent": load.watch_events(resource="widgets"),
            "watch KiB sent": round(load.watch_event_bytes(resource="widgets") / 1024, 1),
            "memory MiB": apiload.mib(rss),
        }
    return Comparison("Two watches versus one shared cache", apiload.table(rows), loads)


def compare_resync(
    lab: Any, rest: RestClient, n: int = 10, window: float = 5.0, expire: int = 3, patience: float = 30.0
) -> Comparison:
    """G3: resync every second, resync every ten minutes, and watch-the-children plus RequeueAfter.

    The controller of the first two variants does not watch the ConfigMaps it owns (the bug). Once
    the controller has converged, the workload deletes one ConfigMap and adds a widget that expires
    after ``expire`` seconds. The counts (requests, reconciles) cover the same ``window`` seconds for
    every variant. Whether the ConfigMap was repaired and the widget marked Expired is judged at the
    pace of this machine: the first variant that does both (the 1 s resync) may take up to ``patience``
    seconds, and shows how long both take here; a later variant that has not done both in twice that
    time (or in ``window``, if longer) has not done them. A slow machine gets more time, and a missing
    watch still shows.
    """
    variants = {
        "resync 1 s": ["--resync", "1"],
        "resync 10 min": ["--resync", "600"],
        "watch children + RequeueAfter": ["--watch-children", "--requeue-after"],
    }
    rows, loads = {}, {}
    pace: float | None = None  # how long the first variant that did both took, on this machine
    for variant, flags in variants.items():
        run = run_id(f"g3-{len(rows)}")
        names = make_widgets(rest, run, n)
        with apiload.measure(lab, "widgets", "configmaps", observer=rest) as load:
            ctl = start_widgets(lab, run, *flags)
            settle(lab, rest, run, quiet=0.5)
            if variant != "resync 1 s":  # let the echoes of its own status writes die down first
                # (a late echo would reconcile the victim's widget, and repair its ConfigMap by chance)
                quiet_metrics(ctl, "controller_reconciles_total", timeout=10, quiet=1.5)
            victim = f"{names[-1]}-widget"
            rest.ok("DELETE", f"{CONFIGMAPS}/{victim}")
            expiring = f"{run}-expiring"
            rest.ok("POST", WIDGETS, widget(expiring, run, expire=expire))
            began = time.monotonic()
            seen = _watch_for(rest, victim, expiring, began, until=began + window, stay=True)
            own = ctl.metrics()  # the counts: the same window for every variant
        deadline = began + (patience if pace is None else max(window, 2 * pace))
        seen = _watch_for(rest, victim, expiring, began, until=deadline, seen=seen)
        ctl.stop()
        if pace is None and None not in seen.values():
            pace = max(t for t in seen.values() if t is not None)
        loads[variant] = load
        rows[variant] = {
            "deleted ConfigMap repaired": seen["repaired"] is not None,
            "widget marked Expired": seen["expired"] is not None,
            "Expired after s": seen["expired"],
            "requests": load.requests(),
            "GET configmaps": load.requests(verb="GET", resource="configmaps"),
            "reconciles": _own(own, "controller_reconciles_total"),
        }
    return Comparison(f"Resync versus RequeueAfter over {window:.0f} s (widget expires after {expire} s)",
                      apiload.table(rows), loads)


def _watch_for(rest: RestClient, configmap: str, widget_name: str, began: float, until: float,
               seen: dict[str, float | None] | None = None, stay: bool = False) -> dict[str, float | None]:
    """Seconds after ``began`` at which ``configmap`` was there again and ``widget_name`` was marked Expired
    (None: not seen), looking until the clock passes ``until``, or until both are seen unless ``stay``."""
    seen = dict(seen or {"repaired": None, "expired": None})
    while True:
        if seen["repaired"] is None and rest.call("GET", f"{CONFIGMAPS}/{configmap}").status_code == 200:
            seen["repaired"] = round(time.monotonic() - began, 1)
        if seen["expired"] is None and expired(rest, widget_name):
            seen["expired"] = round(time.monotonic() - began, 1)
        if time.monotonic() >= until or (None not in seen.values() and not stay):
            return seen
        time.sleep(0.2)


def probe(rest: RestClient, name: str, i: int | str, manager: str = "prober") -> None:
    """Another actor writes its own status field with server-side apply (no generation change)."""
    body = {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Widget",
        "metadata": {"name": name, "namespace": NS},
        "status": {"lastProbe": f"probe-{i}"},
    }
    rest.ok(
        "PATCH",
        f"{WIDGETS}/{name}/status",
        body,
        content_type=SSA,
        params={"fieldManager": manager, "force": "true"},
    )


def compare_predicates(
    lab: Any,
    rest: RestClient,
    n: int = 10,
    spec_changes: int = 5,
    label_changes: int = 10,
    status_changes: int = 10,
) -> Comparison:
    """G4: every event reaches the queue, versus only events that change metadata.generation."""
    rows, loads = {}, {}
    for variant, flags in (("every event", []), ("generation changed", ["--predicate", "generation"])):
        run = run_id("g4-" + variant.split()[0])
        names = make_widgets(rest, run, n)
        with apiload.measure(lab, "widgets", "configmaps", observer=rest) as load:
            ctl = start_widgets(lab, run, *flags)
            settle(lab, rest, run, quiet=0.5)
            # Each write waits until the controller has taken it in (dropped it, or reconciled), so its
            # work queue never merges two of them, on a slow machine or a fast one.
            taken = woken(ctl.metrics())
            for i in range(max(spec_changes, label_changes, status_changes)):
                name = names[i % n]
                if i < label_changes:
                    rest.ok(
                        "PATCH",
                        f"{WIDGETS}/{name}",
                        {"metadata": {"labels": {"touched": str(i)}}},
                        content_type=MERGE,
                    )
                    taken = _taken_in(lab, ctl, taken + 1)
                if i < status_changes:
                    probe(rest, name, i)
                    taken = _taken_in(lab, ctl, taken + 1)
                if i < spec_changes:
                    rest.ok("PATCH", f"{WIDGETS}/{name}", {"spec": {"size": 50 + i}}, content_type=MERGE)
                    taken = _taken_in(lab, ctl, taken + 1)
            settle(lab, rest, run, quiet=0.5)
            time.sleep(0.5)
            own = ctl.metrics()
            ctl.stop()
        loads[variant] = load
        rows[variant] = {
            "watch events received": _own(own, "controller_watch_events_total", resource="widgets"),
            "dropped by predicate": _own(own, "controller_events_filtered_total"),
            "reconciles": _own(own, "controller_reconciles_total"),
            "GET configmaps": load.requests(verb="GET", resource="configmaps"),
            "requests": load.requests(),
        }
    return Comparison("Predicates: which events reach the queue", apiload.table(rows), loads)


# --------------------------------------------------------------------------- the lab's own controller
CONTROLLER = "widget-controller"  # declared in lab.yaml; by default it reconciles the storm widgets
STORM_RUN = "storm"
STORM_WIDGETS = [f"{STORM_RUN}-{i}" for i in range(3)]


def controller_url(lab: Any, name: str = CONTROLLER) -> str | None:
    """The metrics URL of the lab's running controller (the last one it printed), or None when it is not running."""
    return apiload.running_metrics_url(lab, name)


def _taken_in(lab: Any, ctl: apiload.MeteredProcess, count: float) -> float:
    """Wait until the controller has taken in ``count`` updates (see :func:`woken`); return ``count``."""
    lab.wait_until(lambda: woken(ctl.metrics()) >= count, timeout=30, interval=0.05,
                   message="the controller did not take in a write of the workload")
    return count


def woken(metrics: apiload.Metrics) -> float:
    """Updates the controller has dealt with: each is either dropped by its predicate or reconciled."""
    return metrics.total("controller_events_filtered_total", resource="widgets") + metrics.total(
        "controller_reconciles_total"
    )


def status_storm(lab: Any, rest: RestClient, url: str, writes: int = 24) -> dict[str, int]:
    """A storm of status-only writes to the storm widgets, by a writer of its own, one at a time.

    Each write waits until the controller has dealt with it (dropped it, or reconciled), so its work
    queue never merges two of them, on a slow machine or a fast one. Returns what the controller's
    own metrics say happened during the storm.
    """
    before = apiload.scrape(url)
    base, nonce = woken(before), os.urandom(2).hex()
    for i in range(writes):
        probe(rest, STORM_WIDGETS[i % len(STORM_WIDGETS)], f"storm-{nonce}-{i}", manager="storm")
        lab.wait_until(lambda i=i: woken(apiload.scrape(url)) >= base + i + 1, timeout=20,
                       message=f"the controller did not take in status write {i + 1} of the storm")
    after = apiload.scrape(url) - before
    return {
        "status writes": writes,
        "reconciles": _own(after, "controller_reconciles_total"),
        "dropped by predicate": _own(after, "controller_events_filtered_total", resource="widgets"),
        "predicate errors": _own(after, "widget_predicate_errors_total"),
    }


EXPIRY_RUN = "expiry"  # the widgets of the exercise come-back-on-time: none of them ever expires


def expiry_trial(lab: Any, rest: RestClient, url: str, ttl: int = 4, grace: float = 3.0,
                 after: float = 2.0, most_grace: float = 60.0) -> dict[str, Any]:
    """A widget that expires after ``ttl`` seconds joins the expiry widgets, which never expire.

    Returns how long the controller took to mark it Expired (None: not within the grace of its time),
    and how many reconciles the controller ran from the moment it had settled until ``after`` seconds
    past the expiry (or the deadline), while nothing changed but the clock.

    The grace is measured against this machine, side by side: the controller's reconcile of the new
    widget (from its creation until its ConfigMap and status are written, ``pace``) is the same work
    as the reconcile that marks it Expired. So the grace is ``grace`` seconds plus four times that
    pace (at most ``most_grace``): a slow machine gets longer, and a controller that never comes back
    still fails, since nothing but a ten-minute resync would bring it.
    """
    name = f"{EXPIRY_RUN}-{os.urandom(2).hex()}"
    created = time.monotonic()
    rest.ok("POST", WIDGETS, widget(name, EXPIRY_RUN, expire=ttl))
    try:
        lab.wait_until(lambda: children_match(rest, EXPIRY_RUN), timeout=60, interval=0.1,
                       message=f"the controller never reconciled the new widget {name}")
        base, settled = _own(apiload.scrape(url), "controller_reconciles_total"), time.monotonic()
        pace = settled - created
        grace = min(most_grace, grace + 4 * pace)
        took = None
        while took is None and time.monotonic() < created + ttl + grace:
            if expired(rest, name):
                took = round(time.monotonic() - created, 1)
            else:
                time.sleep(0.2)
        # The measuring window: the widgets stay as they are, only the clock moves on.
        time.sleep(max(0.0, (created + (took or ttl + grace) + after) - time.monotonic()))
        return {"widget": name, "expires after s": ttl, "marked Expired after s": took, "grace s": grace,
                "reconciled when made after s": round(pace, 1),
                "seconds measured": round(time.monotonic() - settled, 1),
                "reconciles": _own(apiload.scrape(url), "controller_reconciles_total") - base,
                "widgets": len(rest.ok("GET", WIDGETS, params={"labelSelector": f"{RUN}={EXPIRY_RUN}"})["items"])}
    finally:
        rest.call("DELETE", f"{WIDGETS}/{name}")


def bump_spec(rest: RestClient, name: str = STORM_WIDGETS[0]) -> int:
    """A spec change (a new size) to one storm widget; returns its new generation."""
    size = rest.ok("GET", f"{WIDGETS}/{name}")["spec"]["size"]
    changed = rest.ok("PATCH", f"{WIDGETS}/{name}", {"spec": {"size": size + 1}}, content_type=MERGE)
    return int(changed["metadata"]["generation"])


# --------------------------------------------------------------------------- small demonstrations
GADGET = f"/apis/{GROUP}/v1/namespaces/{NS}/gadgets/demo"


def first_lines(script: str = "widgetctl.py", function: str = "async def main") -> str:
    """The start of a controller's main(), to show where its metrics endpoint comes up."""
    text = (CONTROLLERS / script).read_text()
    start = text.index(function)
    return text[start : text.index("\n\n", start)]


def gadget_status_write(rest: RestClient) -> tuple[int, int, int]:
    """Write gadget demo's status the only way its CRD allows; return (status code, generation before, after)."""
    before = rest.ok("GET", GADGET)["metadata"]["generation"]
    via_status = rest.call(
        "PATCH", f"{GADGET}/status", {"status": {"lastProbe": "via /status"}}, content_type=MERGE
    )
    if via_status.status_code == 404:  # no status subresource: status is part of the main object
        rest.ok("PATCH", GADGET, {"status": {"lastProbe": f"probe-{time.time():.0f}"}}, content_type=MERGE)
    after = rest.ok("GET", GADGET)["metadata"]["generation"]
    return via_status.status_code, before, after
