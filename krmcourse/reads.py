"""Reading a lab's objects from its API server over HTTP, the way ``kubectl get -o json`` would.

Checks and tests read the cluster in polling loops, hundreds of times a run. A kubectl call is a new
process each time (about a tenth of a second of CPU), so :meth:`krmcourse.Lab.get` and
:meth:`krmcourse.Lab.objects` read through one HTTPS connection per cluster instead, and keep kubectl
for what the learner should see.

kubectl's names for a kind work here too: ``configmap``, ``cm``, ``ConfigMap``, ``deployments.apps``,
``buckets.storage.krmcourse.dev``. They are resolved the way kubectl resolves them, from the API
server's aggregated discovery: the core group first, then the groups in the server's order, each at
its preferred version. Discovery of the named groups is asked again on every read, with its ETag, so
a CRD that was added, or whose preferred version changed a moment ago, is seen at once at the cost of
a ``304 Not Modified``.

Anything this path cannot answer for sure (credentials only kubectl understands, an unknown kind, a
refusal, no answer) is left to kubectl, whose error message the learner already knows: :meth:`get`
and :meth:`objects` return :data:`ASK_KUBECTL` then.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote, urlencode

import yaml

from . import probe

#: Aggregated discovery (stable since Kubernetes 1.30): every group, version and resource in one answer.
DISCOVERY = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"


class _AskKubectl:
    def __repr__(self) -> str:
        return "ASK_KUBECTL"


#: What :meth:`Reader.get` returns when only kubectl can answer.
ASK_KUBECTL: Final = _AskKubectl()


@dataclass(frozen=True)
class Resource:
    """One resource type as discovery describes it."""

    group: str
    version: str
    plural: str
    namespaced: bool

    def path(self, name: str, namespace: str) -> str:
        return f"{self.collection(namespace)}/{quote(name, safe='')}"

    def collection(self, namespace: str | None) -> str:
        """The path of the resource's objects in ``namespace``, or in all of them (``None``)."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        where = f"/namespaces/{quote(namespace, safe='')}" if self.namespaced and namespace is not None else ""
        return f"{base}{where}/{self.plural}"


def resource_names(discovery: dict[str, Any]) -> dict[str, Resource]:
    """Every name kubectl accepts for each resource of an aggregated discovery answer.

    The first resource to claim a name keeps it: groups come in the server's order of priority, and
    versions in order of preference, as kubectl reads them.
    """
    names: dict[str, Resource] = {}
    for group in discovery.get("items") or []:
        group_name = group.get("metadata", {}).get("name", "")
        for version in group.get("versions") or []:
            for res in version.get("resources") or []:
                found = Resource(group_name, version["version"], res["resource"], res.get("scope") == "Namespaced")
                kind = (res.get("responseKind") or {}).get("kind", "")
                short = [res["resource"], res.get("singularResource") or "", kind.lower(),
                         *(res.get("shortNames") or [])]
                qualified = [f"{n}.{group_name}" for n in short[:3]] + \
                            [f"{n}.{version['version']}.{group_name}" for n in short[:3]]
                for name in (*short, *qualified) if group_name else short:
                    if name:
                        names.setdefault(name.lower(), found)
    return names


class Reader:
    """Reads objects from the cluster of one kubeconfig, over one connection, until the file changes."""

    def __init__(self, kubeconfig: Path) -> None:
        self.kubeconfig = Path(kubeconfig)
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._api: probe.ApiProbe | None = None
        self._namespace = "default"
        self._core: dict[str, Any] = {}
        self._groups: dict[str, Any] = {}
        self._etag = ""
        self._names: dict[str, Resource] = {}

    def get(self, kind: str, name: str, namespace: str | None = None,
            show_managed_fields: bool = False) -> dict[str, Any] | None | _AskKubectl:
        """The object, None when it does not exist, or :data:`ASK_KUBECTL`."""
        with self._lock:
            api = self._connect()
            resource = self._resources(api, [kind])[0] if api is not None else None
        if api is None or resource is None:
            return ASK_KUBECTL
        status, body = api.get(resource.path(name, namespace or self._namespace))
        if status == 200:
            obj: dict[str, Any] = json.loads(body)
            if not show_managed_fields:
                obj.get("metadata", {}).pop("managedFields", None)
            return obj
        if status == 404 and _json(body).get("details", {}).get("name") == name:
            return None  # the object is not there (a missing type says so without naming the object)
        return ASK_KUBECTL

    def objects(self, kinds: list[str], namespace: str | None = None, all_namespaces: bool = False,
                selector: str | None = None, field_selector: str | None = None,
                show_managed_fields: bool = False) -> list[list[dict[str, Any]] | _AskKubectl]:
        """The objects of each kind, each with its ``kind`` and ``apiVersion`` as kubectl shows them, or
        :data:`ASK_KUBECTL` for a kind. Discovery is asked once for them all."""
        with self._lock:
            api = self._connect()
            if api is None:
                return [ASK_KUBECTL] * len(kinds)
            resources = self._resources(api, kinds)
        query = urlencode({k: v for k, v in (("labelSelector", selector), ("fieldSelector", field_selector)) if v})
        where = None if all_namespaces else namespace or self._namespace
        return [ASK_KUBECTL if resource is None else _items(api, resource.collection(where), query, show_managed_fields)
                for resource in resources]

    def listable(self, namespaced: bool) -> list[str] | _AskKubectl:
        """Every resource type that can be listed, namespaced or cluster-wide, by the names ``kubectl
        api-resources --verbs=list -o name`` prints (``plural``, ``plural.group`` outside the core group):
        each once, at its group's preferred version. Or :data:`ASK_KUBECTL`."""
        with self._lock:
            api = self._connect()
            groups = self._discover(api) if api is not None else None
        if groups is None:
            return ASK_KUBECTL
        names = []
        for group in groups:
            group_name = group.get("metadata", {}).get("name", "")
            preferred = (group.get("versions") or [{}])[0]  # versions come in order of preference
            for res in preferred.get("resources") or []:
                if "list" in (res.get("verbs") or []) and (res.get("scope") == "Namespaced") == namespaced:
                    names.append(f"{res['resource']}.{group_name}" if group_name else res["resource"])
        return names

    def close(self) -> None:
        with self._lock:
            self._drop()

    # ------------------------------------------------------------------ connection and discovery
    def _connect(self) -> probe.ApiProbe | None:
        """The connection for the kubeconfig as it is now: a rewritten file (a new cluster) starts afresh."""
        try:
            st = self.kubeconfig.stat()
        except OSError:
            self._drop()
            return None
        stamp = (st.st_mtime_ns, st.st_ino)
        if stamp != self._stamp:
            self._drop()
            self._stamp = stamp
            self._api = probe.for_kubeconfig(self.kubeconfig)
            self._namespace = _context_namespace(self.kubeconfig)
        return self._api

    def _drop(self) -> None:
        if self._api is not None:
            self._api.close()
        self._api, self._stamp, self._core, self._groups, self._etag, self._names = None, None, {}, {}, "", {}

    def _discover(self, api: probe.ApiProbe) -> list[dict[str, Any]] | None:
        """Every API group as the server has it now, the core group first: the core group asked once, the
        named groups again each time, with their ETag. None when the server did not answer."""
        if not self._core:
            status, body = api.get("/api", accept=DISCOVERY)
            if status != 200:
                return None
            self._core = _json(body)
        status, body, etag = api.get_fresh("/apis", accept=DISCOVERY, etag=self._etag)
        if status == 200:
            self._groups, self._etag, self._names = _json(body), etag, {}
        elif status != 304:
            return None
        return [*self._core.get("items", []), *self._groups.get("items", [])]

    def _resources(self, api: probe.ApiProbe, kinds: list[str]) -> list[Resource | None]:
        """What each of ``kinds`` names, from one look at discovery; None for a name the server does not know."""
        groups = self._discover(api)
        if groups is None:
            return [None] * len(kinds)
        if not self._names:
            self._names = resource_names({"items": groups})
        return [self._names.get(kind.lower()) for kind in kinds]


def _items(api: probe.ApiProbe, path: str, query: str, show_managed_fields: bool) -> list[dict[str, Any]] | _AskKubectl:
    """One list's items, with the ``kind`` and ``apiVersion`` kubectl puts back on each, or :data:`ASK_KUBECTL`."""
    status, body = api.get(f"{path}?{query}" if query else path)
    if status != 200:
        return ASK_KUBECTL
    listing = _json(body)
    # The API server leaves kind and apiVersion off a list's items; kubectl puts them back.
    kind_of_items = str(listing.get("kind", "")).removesuffix("List")
    items: list[dict[str, Any]] = listing.get("items") or []
    for item in items:
        item.setdefault("apiVersion", listing.get("apiVersion"))
        item.setdefault("kind", kind_of_items)
        if not show_managed_fields:
            item.get("metadata", {}).pop("managedFields", None)
    return items


def _json(body: bytes) -> dict[str, Any]:
    try:
        found = json.loads(body)
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _context_namespace(kubeconfig: Path) -> str:
    """The namespace of the kubeconfig's current context, or ``default``, as kubectl would use."""
    try:
        config = yaml.safe_load(kubeconfig.read_text()) or {}
    except (OSError, yaml.YAMLError):
        return "default"
    for ctx in config.get("contexts") or []:
        if ctx.get("name") == config.get("current-context"):
            return str((ctx.get("context") or {}).get("namespace") or "default")
    return "default"
