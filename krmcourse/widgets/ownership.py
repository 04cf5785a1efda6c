"""A tree of a resource and everything it owns, drawn from ownerReferences.

The data model (:class:`OwnershipGraph`, :class:`OwnerNode`) is built from plain object dicts, so it
can be tested on any list of objects. :func:`collect_namespace` fills it from a live cluster: it asks
the API's discovery which namespaced kinds can be listed, then lists each kind in the namespace, so
custom resources are found the same way as built-in ones. Both go over the lab's one HTTPS
connection (:meth:`krmcourse.Lab.listable_kinds`, :meth:`krmcourse.Lab.objects`), not through a
kubectl process per refresh. :class:`OwnershipTree` is the thin ipywidgets view, with a Refresh
button and an optional background refresh.
"""

from __future__ import annotations

import html
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

Obj = dict[str, Any]

# Kinds left out of discovery-driven listing: noise (events), or huge and never owners here.
SKIPPED_RESOURCES = frozenset(
    {"events", "events.events.k8s.io", "bindings", "localsubjectaccessreviews.authorization.k8s.io"}
)


class Cluster(Protocol):
    """What the tree needs from a cluster, as a :class:`krmcourse.Lab` provides it."""

    def listable_kinds(self, namespaced: bool = True) -> list[str]: ...

    def objects(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]: ...


@dataclass(frozen=True)
class ObjectRef:
    kind: str
    name: str
    namespace: str
    uid: str

    def __str__(self) -> str:
        return f"{self.kind}/{self.name}"


@dataclass
class OwnerNode:
    ref: ObjectRef
    state: str
    controller: bool = True  # False when the owner reference to the parent is not the controller one
    children: list[OwnerNode] = field(default_factory=list)

    def walk(self, depth: int = 0) -> Iterator[tuple[int, OwnerNode]]:
        yield depth, self
        for child in self.children:
            yield from child.walk(depth + 1)

    def find(self, kind: str) -> list[OwnerNode]:
        """Every node of this kind in the subtree (kind compared case-insensitively)."""
        return [n for _, n in self.walk() if n.ref.kind.lower() == kind.lower()]

    def __len__(self) -> int:
        return sum(1 for _ in self.walk())


def describe_state(obj: Obj) -> str:
    """A few words about an object's state: Terminating, a Ready condition, or a pod phase."""
    meta = obj.get("metadata", {})
    parts: list[str] = []
    if meta.get("deletionTimestamp"):
        parts.append("Terminating")
    status = obj.get("status") or {}
    conditions = status.get("conditions") if isinstance(status, dict) else None
    ready = next((c for c in conditions or [] if c.get("type") in ("Ready", "Available")), None)
    if ready is not None:
        parts.append(f"{ready['type']}={ready.get('status')}")
    elif isinstance(status, dict) and status.get("phase"):
        parts.append(str(status["phase"]))
    if meta.get("finalizers"):
        parts.append(f"finalizers={len(meta['finalizers'])}")
    return ", ".join(parts)


class OwnershipGraph:
    """Objects indexed by uid, with the owner → owned edges their ownerReferences declare."""

    def __init__(self, objects: Iterable[Obj]) -> None:
        self.objects: dict[str, Obj] = {}
        self.owned: dict[str, list[tuple[str, bool]]] = {}
        for obj in objects:
            meta = obj.get("metadata", {})
            if "uid" not in meta or "kind" not in obj:
                raise ValueError(
                    f"every object needs kind and metadata.uid; got {obj.get('kind')!r} "
                    f"{meta.get('name')!r} (list items lose their kind: set it from the list)"
                )
            self.objects[meta["uid"]] = obj
        for uid, obj in self.objects.items():
            for ref in obj["metadata"].get("ownerReferences", []):
                self.owned.setdefault(ref["uid"], []).append((uid, bool(ref.get("controller"))))

    def ref(self, uid: str) -> ObjectRef:
        obj = self.objects[uid]
        meta = obj["metadata"]
        return ObjectRef(obj["kind"], meta["name"], meta.get("namespace", ""), uid)

    def find(self, kind: str, name: str) -> str | None:
        """The uid of the object of this kind (case-insensitive, singular) and name, if present."""
        for uid, obj in self.objects.items():
            if obj["kind"].lower() == kind.lower() and obj["metadata"]["name"] == name:
                return uid
        return None

    def roots(self) -> list[str]:
        """Objects that own something and are owned by nothing known here."""
        owned = {child for children in self.owned.values() for child, _ in children}
        return sorted(
            (uid for uid in self.owned if uid in self.objects and uid not in owned), key=lambda u: str(self.ref(u))
        )

    def tree(self, uid: str) -> OwnerNode:
        """The tree under one object. An ownerReference cycle (possible, if broken) is cut."""
        return self._node(uid, True, frozenset())

    def _node(self, uid: str, controller: bool, seen: frozenset[str]) -> OwnerNode:
        node = OwnerNode(self.ref(uid), describe_state(self.objects[uid]), controller)
        seen = seen | {uid}
        children = [(c, ctl) for c, ctl in self.owned.get(uid, []) if c in self.objects and c not in seen]
        for child, ctl in sorted(children, key=lambda c: str(self.ref(c[0]))):
            node.children.append(self._node(child, ctl, seen))
        return node


def render_text(node: OwnerNode) -> str:
    lines = []
    for depth, n in node.walk():
        prefix = "  " * (depth - 1) + "└─ " if depth else ""
        extra = f"  ({n.state})" if n.state else ""
        link = "" if n.controller else "  [owner, not controller]"
        lines.append(f"{prefix}{n.ref}{extra}{link}")
    return "\n".join(lines)


def render_html(node: OwnerNode) -> str:
    def item(n: OwnerNode) -> str:
        state = f' <span style="color:#666">({html.escape(n.state)})</span>' if n.state else ""
        kids = "".join(item(c) for c in n.children)
        return (
            f"<li><b>{html.escape(n.ref.kind)}</b>/{html.escape(n.ref.name)}{state}"
            + (f"<ul>{kids}</ul>" if kids else "")
            + "</li>"
        )

    return f'<ul style="font-family:monospace;list-style:none;padding-left:1em">{item(node)}</ul>'


def listable_namespaced_resources(cluster: Cluster) -> list[str]:
    """Discovery, asked fresh: every namespaced resource that supports list (``plural.group``)."""
    return [r for r in cluster.listable_kinds(namespaced=True)
            if r not in SKIPPED_RESOURCES and r.split(".")[0] not in SKIPPED_RESOURCES]


def collect_namespace(cluster: Cluster, namespace: str) -> list[Obj]:
    """Every object of every listable namespaced kind in `namespace`, one request per kind, each with
    its kind and apiVersion."""
    return cluster.objects(",".join(listable_namespaced_resources(cluster)), namespace)


class OwnershipTree:
    """A live view of what one object owns, directly and through its children.

    >>> tree = OwnershipTree(lab, "greeting", "hello", namespace="demo")   # doctest: +SKIP
    >>> tree            # shows the widget; print(tree) shows the text form  # doctest: +SKIP
    """

    def __init__(self, cluster: Cluster, kind: str, name: str, namespace: str) -> None:
        self.cluster = cluster
        self.kind, self.name, self.namespace = kind, name, namespace
        self.root: OwnerNode | None = None
        self._widget: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.refresh()

    def refresh(self) -> OwnerNode:
        """Read the namespace again and rebuild the tree. Raises LookupError if the root is gone."""
        graph = OwnershipGraph(collect_namespace(self.cluster, self.namespace))
        uid = graph.find(self.kind, self.name)
        if uid is None:
            raise LookupError(
                f"no {self.kind} called {self.name!r} in namespace {self.namespace!r}; "
                "check the kind (singular, e.g. 'deployment') and the name"
            )
        self.root = graph.tree(uid)
        if self._widget is not None:
            self._widget.children[1].value = render_html(self.root)
        return self.root

    def start(self, interval: float = 2.0) -> None:
        """Refresh in a background thread every `interval` seconds until stop()."""
        if interval <= 0:
            raise ValueError("interval must be positive, in seconds")
        self.stop()
        self._stop.clear()

        def loop() -> None:
            while not self._stop.wait(interval):
                try:
                    self.refresh()
                except Exception:  # noqa: BLE001 - a transient API error must not kill the view
                    continue

        self._thread = threading.Thread(target=loop, name="ownership-tree", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    @property
    def widget(self) -> Any:
        if self._widget is None:
            import ipywidgets

            button = ipywidgets.Button(description="Refresh", icon="refresh")
            button.on_click(lambda _: self.refresh())
            body = ipywidgets.HTML(render_html(self.root) if self.root else "")
            self._widget = ipywidgets.VBox([button, body])
        return self._widget

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)

    def __str__(self) -> str:
        return render_text(self.root) if self.root else "(empty)"

    def __repr__(self) -> str:
        return str(self)
