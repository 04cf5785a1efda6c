"""The Widget controller, with switches for every good and bad habit that Part V measures.

For each Widget it keeps a ConfigMap ``<name>-widget`` that holds the widget's size and colour, and
it writes a ``Ready`` condition (True, or False with reason Expired once ``spec.expireAfterSeconds``
have passed) and ``status.observedGeneration``. The switches change how it learns about the world,
never what it wants:

--poll SECONDS        list every N seconds instead of list+watch (G2)
--loops configmap,tally
                      which control loops run in this process; loops in one process share one cache (G2)
--resync SECONDS      hand every cached widget to the loops again every N seconds (G3)
--watch-children      also watch the ConfigMaps it owns and map them to their widget (G3: the bug fix)
--requeue-after       come back to an expiring widget exactly when it expires (G3)
--requeue-after FILE.py
                      let a function of that file decide: after each reconcile, ``requeue_after(widget)``
                      gives the seconds until the widget needs another one although nothing changed, or
                      None (G3: the learner's own RequeueAfter; as in controller-runtime, <= 0 means none)
--predicate generation
                      drop widget updates that do not change metadata.generation (G4)
--predicate FILE.py   let a function of that file decide: an update reaches the queue only when
                      ``wakes(old, new)`` is true (G4: the learner's own predicate, see lab.save_code)
--selector LABELS     only widgets with these labels, filtered on the server; by default the
                      exercise's widgets (``citizens.krmcourse.dev/run=storm``)

Run it with KUBECONFIG set; ``lab.run_controller`` does that.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import cast

from prometheus_client import Counter, Gauge

from krmcourse.conditions import ready_condition
from krmcourse.controllerkit import (
    CONFIGMAPS,
    FILTERED,
    Client,
    Conflict,
    Informer,
    Resource,
    WorkQueue,
    controller_main,
    key_of,
    log,
    run_loop,
    serve_metrics,
)
from krmcourse.labcode import saved_function

WIDGETS = Resource("citizens.krmcourse.dev", "v1", "widgets")

TALLY = Gauge("widgets_by_color", "Widgets per colour, kept by the tally loop", ["color"])
PREDICATE_ERRORS = Counter("widget_predicate_errors", "Updates let through because the predicate raised")
REQUEUE_ERRORS = Counter("widget_requeue_errors", "Reconciles not requeued because requeue_after raised")
WIDGET_LABEL = "citizens.krmcourse.dev/widget"
STORM = "citizens.krmcourse.dev/run=storm"  # the widgets of the exercise add-a-predicate

Predicate = Callable[[dict, dict], bool]


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--namespace", default="citizens")
    p.add_argument("--selector", default=STORM, help="only widgets with these labels (a server-side filter)")
    p.add_argument("--poll", type=float, default=0.0)
    p.add_argument("--loops", default="configmap")
    p.add_argument("--resync", type=float, default=0.0)
    p.add_argument("--watch-children", action="store_true")
    p.add_argument("--requeue-after", nargs="?", const="exact", default=None, metavar="FILE.py",
                   help="exactly when a widget expires, or what requeue_after(widget) in FILE.py says")
    p.add_argument("--predicate", default="none", help="none, generation, or a Python file defining wakes(old, new)")
    args = p.parse_args(argv)
    if args.predicate not in ("none", "generation") and not Path(args.predicate).is_file():
        p.error(f"--predicate takes none, generation or a Python file, not {args.predicate}")
    if args.requeue_after not in (None, "exact") and not Path(args.requeue_after).is_file():
        p.error(f"--requeue-after takes nothing or a Python file, not {args.requeue_after}")
    args.loops = [name for name in args.loops.split(",") if name]
    unknown = set(args.loops) - {"configmap", "tally"}
    if unknown or not args.loops:
        p.error(f"--loops takes configmap and/or tally, not {','.join(sorted(unknown)) or 'nothing'}")
    return args


def generation_changed(old: dict, new: dict) -> bool:
    return old["metadata"].get("generation") != new["metadata"].get("generation")


def load_predicate(choice: str) -> Predicate | None:
    """The predicate for widget updates: none, the generation one, or ``wakes`` from a file (its only function
    will do too: ``lab.save_code`` saves one function, whatever its name)."""
    if choice == "none":
        return None
    if choice == "generation":
        return generation_changed
    found = saved_function(Path(choice), "wakes")
    log(f"predicate: {found.__name__} from {choice}")
    return cast(Predicate, found)


def desired_configmap(widget: dict) -> dict:
    meta, spec = widget["metadata"], widget.get("spec", {})
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": f"{meta['name']}-widget",
            "namespace": meta["namespace"],
            "labels": {**meta.get("labels", {}), WIDGET_LABEL: meta["name"]},
            "ownerReferences": [
                {
                    "apiVersion": WIDGETS.api_version,
                    "kind": "Widget",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "data": {"size": str(spec.get("size", 1)), "color": str(spec.get("color", "grey"))},
    }


def seconds_left(widget: dict) -> float | None:
    """Seconds until the widget expires (<= 0: expired), or None when it never expires."""
    ttl = widget.get("spec", {}).get("expireAfterSeconds")
    if ttl is None:
        return None
    created = datetime.fromisoformat(widget["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
    return float(ttl) - (datetime.now(UTC) - created).total_seconds()


class WidgetController:
    def __init__(self, client: Client, args: argparse.Namespace) -> None:
        self.client = client
        self.args = args
        self.ns = args.namespace
        self.widgets = Informer(
            client, WIDGETS, self.ns, args.selector or None, poll_interval=args.poll, resync=args.resync
        )
        self.children: Informer | None = None
        if args.watch_children:
            child_selector = ",".join(filter(None, [args.selector, WIDGET_LABEL]))
            self.children = Informer(client, CONFIGMAPS, self.ns, child_selector)
            self.children.handlers.append(self.on_child)
        self.queues = {name: WorkQueue() for name in args.loops}
        self.predicate = load_predicate(args.predicate)
        self.requeue: Callable[[dict], float | None] | None = None
        if args.requeue_after not in (None, "exact"):
            self.requeue = saved_function(Path(args.requeue_after), "requeue_after")
            log(f"requeue_after: {self.requeue.__name__} from {args.requeue_after}")
        self.widgets.handlers.append(self.on_widget)

    # ---- events -> keys
    def wakes(self, old: dict, new: dict) -> bool:
        """Whether an update reaches the queue (as a predicate's Update function does in controller-runtime)."""
        if self.predicate is None:
            return True
        try:
            return bool(self.predicate(old, new))
        except Exception as exc:  # noqa: BLE001 - a broken predicate lets the event through, and says so
            PREDICATE_ERRORS.inc()
            log(f"predicate raised {type(exc).__name__}: {exc}; letting the update through")
            return True

    def on_widget(self, kind: str, old: dict | None, new: dict | None) -> None:
        # Creations and deletions always pass; a predicate judges updates (and resyncs) only.
        if kind in ("MODIFIED", "RESYNC") and old and new and not self.wakes(old, new):
            FILTERED.labels("widgets").inc()
            return
        key = key_of(new or old or {})
        for queue in self.queues.values():
            queue.add(key)

    def on_child(self, kind: str, old: dict | None, new: dict | None) -> None:
        obj = new or old or {}
        owner = obj["metadata"].get("labels", {}).get(WIDGET_LABEL)
        if owner and "configmap" in self.queues:
            self.queues["configmap"].add(f"{obj['metadata']['namespace']}/{owner}")

    # ---- the configmap loop
    async def reconcile_configmap(self, key: str) -> float | None:
        widget = self.widgets.store.get(key)
        if widget is None:
            return None  # deleted: the garbage collector removes the ConfigMap through its ownerReference
        want = desired_configmap(widget)
        name = want["metadata"]["name"]
        if self.children is not None:
            have = self.children.store.get(f"{self.ns}/{name}")
        else:
            have = await self.client.get(CONFIGMAPS, self.ns, name)
        if have is None:
            try:
                await self.client.create(CONFIGMAPS, self.ns, want)
                log(f"reconcile {key}: created configmap {name}")
            except Conflict:
                pass  # our cache was behind; the watch event that follows brings us back here
        elif have.get("data") != want["data"]:
            await self.client.patch(CONFIGMAPS, self.ns, name, {"data": want["data"]})
            log(f"reconcile {key}: updated configmap {name}")
        left = seconds_left(widget)
        expired = left is not None and left <= 0
        if expired:
            ready = ready_condition(widget, False, "Expired", "spec.expireAfterSeconds have passed")
        else:
            ready = ready_condition(widget, True, "ConfigMapSynced", f"ConfigMap {name} holds size and colour")
        status = {"configMap": name, "observedGeneration": widget["metadata"]["generation"], "conditions": [ready]}
        current = widget.get("status") or {}
        if any(current.get(k) != v for k, v in status.items()):
            await self.client.patch(
                WIDGETS, self.ns, widget["metadata"]["name"], {"status": status}, "status"
            )
            log(f"reconcile {key}: status {ready['reason']}")
        return self.requeue_after(widget, None if expired or left is None else left + 0.05)

    def requeue_after(self, widget: dict, exact: float | None) -> float | None:
        """When to reconcile the widget again although nothing changed: RequeueAfter, or None."""
        if self.requeue is None:
            return exact if self.args.requeue_after == "exact" else None
        try:
            after = self.requeue(widget)
            seconds = None if after is None else float(after)
        except Exception as exc:  # noqa: BLE001 - the learner's code: say so, and do not requeue
            REQUEUE_ERRORS.inc()
            log(f"requeue_after raised {type(exc).__name__}: {exc}; not requeueing {key_of(widget)}")
            return None
        return seconds if seconds is not None and seconds > 0 else None

    # ---- the tally loop: read-only, it only needs the cache
    async def reconcile_tally(self, key: str) -> float | None:
        counts: dict[str, int] = {}
        for widget in self.widgets.store.values():
            color = str(widget.get("spec", {}).get("color", "grey"))
            counts[color] = counts.get(color, 0) + 1
        TALLY.clear()
        for color, count in counts.items():
            TALLY.labels(color).set(count)
        return None

    async def run(self) -> None:
        tasks = [asyncio.create_task(self.widgets.run())]
        if self.children is not None:
            tasks.append(asyncio.create_task(self.children.run()))
            await self.children.synced.wait()
        await self.widgets.synced.wait()
        log(f"synced: {len(self.widgets.store)} widgets; loops {','.join(self.queues)}")
        for name, queue in self.queues.items():
            reconcile = self.reconcile_configmap if name == "configmap" else self.reconcile_tally
            tasks.append(asyncio.create_task(run_loop(name, queue, reconcile)))
        await asyncio.gather(*tasks)


async def main(argv: list[str]) -> None:
    serve_metrics()  # first line: measure from the start, not once the controller "works"
    args = parse_args(argv)
    import kr8s.asyncio

    api = await kr8s.asyncio.api(kubeconfig=os.environ["KUBECONFIG"])
    await WidgetController(Client(api), args).run()


if __name__ == "__main__":
    controller_main(main(sys.argv[1:]))
