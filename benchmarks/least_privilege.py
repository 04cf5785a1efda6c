"""Least privilege, measured: what each reference controller is granted against what it does.

Run:  .venv/bin/python benchmarks/least_privilege.py [NOTEBOOK-OR-CONTROLLER ...] [--keep-going]

For every controller listed in ``least_privilege_justified.yaml`` (beside this script) it runs the
controller's notebook, one notebook at a time, in a fresh state folder (so a fresh cluster and a fresh
audit log) with the solution cells applied, as the tests run them. After every cell it

- reads the new lines of every cluster's audit log and keeps the requests made by the controllers'
  ServiceAccounts (so the notebook's own teardown, which deletes the log with the cluster, loses
  nothing), and
- records the RBAC rules bound to those ServiceAccounts (Roles and ClusterRoles, through RoleBindings
  and ClusterRoleBindings, including any an exercise's solution added), kept as a union over the run.

A granted entry (verb, resource[/subresource], scope, resourceNames) is *used* when at least one
allowed request in the audit log matches it; a watch counts whether the log shows it as verb
``watch`` or as ``list`` with ``watch=true``. Entries on ``events`` and ``leases`` are *not audited*:
the lab's audit policy drops them (level None), so the log can never show them used. Every entry that
is unused or not audited must be either listed under ``removed:`` (taken out of the lab's RBAC, and
then it must no longer be granted) or under ``justified:`` with a one-line reason. The script prints a
markdown table of those entries, writes the whole measurement to benchmarks/results/, and exits 1 when
an entry has no reason (or a ``removed`` entry is still granted, or a notebook failed).

The justifications live in a data file rather than in the labs' ``lab.yaml``: lab.yaml is read
strictly by krmcourse and describes what a lab teaches, while this is a statement about one
measurement; a data file keeps both the reasons and the list of controllers where a test can check
them without a cluster (tests/test_least_privilege.py).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = HERE / "least_privilege_justified.yaml"

#: Resources the lab's audit policy never records (see krmcourse/providers/kwok.py, AUDIT_POLICY).
NOT_AUDITED = {("", "events"), ("events.k8s.io", "events"), ("coordination.k8s.io", "leases")}


# ----------------------------------------------------------------------------- the data file
def load_data(path: Path = DATA) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


def problems_in_data(data: dict[str, Any], labs_dir: Path = ROOT / "labs",
                     notebooks_dir: Path = ROOT / "notebooks") -> list[str]:
    """What is wrong with the data file's shape; every controller must name a lab, notebook and account."""
    out: list[str] = []
    controllers = data.get("controllers")
    if not isinstance(controllers, list) or not controllers:
        return ["'controllers' must be a non-empty list"]
    names: set[str] = set()
    for i, c in enumerate(controllers):
        where = f"controllers[{i}]"
        if not isinstance(c, dict):
            out.append(f"{where} is not a mapping")
            continue
        name = c.get("name")
        if not isinstance(name, str) or not name:
            out.append(f"{where}: no name")
        elif name in names:
            out.append(f"{where}: {name} is listed twice")
        names.add(str(name))
        lab = c.get("lab")
        if not isinstance(lab, str) or not (labs_dir / lab / "lab.yaml").is_file():
            out.append(f"{where} ({name}): lab {lab!r} does not exist")
        nb = c.get("notebook")
        if not isinstance(nb, str) or not (notebooks_dir / nb).is_file():
            out.append(f"{where} ({name}): notebook {nb!r} does not exist")
        sa = c.get("serviceaccount")
        if not isinstance(sa, str) or sa.count("/") != 1:
            out.append(f"{where} ({name}): serviceaccount must be NAMESPACE/NAME")
        elif isinstance(lab, str) and (labs_dir / lab).is_dir() and not _sa_defined(labs_dir / lab, sa):
            out.append(f"{where} ({name}): no ServiceAccount {sa} in labs/{lab}")
        if "not_run" in c and not (isinstance(c["not_run"], str) and c["not_run"].strip()):
            out.append(f"{where} ({name}): not_run must say why in one line")
        for key in ("justified", "removed"):
            entries = c.get(key, []) or []
            if not isinstance(entries, list):
                out.append(f"{where} ({name}): {key} must be a list")
                continue
            for j, e in enumerate(entries):
                if not isinstance(e, dict) or not all(isinstance(e.get(k), str) and e.get(k)
                                                      for k in ("verb", "resource", "scope")):
                    out.append(f"{where} ({name}): {key}[{j}] needs verb, resource and scope")
                    continue
                if key == "justified" and not (isinstance(e.get("reason"), str) and e["reason"].strip()):
                    out.append(f"{where} ({name}): {key}[{j}] {entry_label(e)} has no reason")
                if key == "justified" and "\n" in e.get("reason", "").strip():
                    out.append(f"{where} ({name}): {key}[{j}] reason must be one line")
                if not (e["scope"] == "cluster" or e["scope"].startswith("namespace/")):
                    out.append(f"{where} ({name}): {key}[{j}] scope must be 'cluster' or 'namespace/NS'")
    return out


def _sa_defined(lab_dir: Path, sa: str) -> bool:
    namespace, name = sa.split("/")
    for path in sorted(lab_dir.rglob("*.yaml")):
        try:
            docs = list(yaml.safe_load_all(path.read_text()))
        except yaml.YAMLError:
            continue
        for doc in docs:
            if (isinstance(doc, dict) and doc.get("kind") == "ServiceAccount"
                    and doc.get("metadata", {}).get("name") == name
                    and doc.get("metadata", {}).get("namespace") == namespace):
                return True
    return False


# ----------------------------------------------------------------------------- grants
@dataclass(frozen=True, order=True)
class Grant:
    verb: str
    group: str
    resource: str  # "deployments" or "deployments/scale"
    scope: str  # "cluster" or "namespace/NS"
    names: tuple[str, ...] = ()

    @property
    def key(self) -> dict[str, str]:
        out = {"verb": self.verb, "resource": resource_label(self.group, self.resource), "scope": self.scope}
        if self.names:
            out["names"] = ",".join(self.names)
        return out


def resource_label(group: str, resource: str) -> str:
    base, _, sub = resource.partition("/")
    full = f"{base}.{group}" if group else base
    return f"{full}/{sub}" if sub else full


def entry_label(e: dict[str, str]) -> str:
    return f"{e['verb']} {e['resource']} ({e['scope']})"


def _subject_is(subject: dict[str, Any], namespace: str, name: str) -> bool:
    return (subject.get("kind") == "ServiceAccount" and subject.get("name") == name
            and subject.get("namespace", "") == namespace)


def grants_for(rbac: dict[str, list[dict[str, Any]]], sa: str) -> dict[Grant, str]:
    """Every rule bound to the ServiceAccount by the lab, expanded, with the role that grants it.

    Only bindings that name the account itself count: the cluster's default grants to every
    authenticated user (discovery, self-reviews) are not the lab's to narrow."""
    namespace, name = sa.split("/")
    roles = {("Role", r["metadata"]["namespace"], r["metadata"]["name"]): r for r in rbac["roles"]}
    roles.update({("ClusterRole", "", r["metadata"]["name"]): r for r in rbac["clusterroles"]})
    out: dict[Grant, str] = {}
    for binding in rbac["rolebindings"] + rbac["clusterrolebindings"]:
        if not any(_subject_is(s, namespace, name) for s in binding.get("subjects") or []):
            continue
        bns = binding["metadata"].get("namespace", "")
        ref = binding["roleRef"]
        role = roles.get((ref["kind"], bns if ref["kind"] == "Role" else "", ref["name"]))
        if role is None:
            continue
        scope = f"namespace/{bns}" if bns else "cluster"
        source = f"{ref['kind']} {ref['name']}" + (f" (namespace {bns})" if ref["kind"] == "Role" else "")
        for rule in role.get("rules") or []:
            for group in rule.get("apiGroups") or []:
                for resource in rule.get("resources") or []:
                    for verb in rule.get("verbs") or []:
                        grant = Grant(verb, group, resource, scope, tuple(rule.get("resourceNames") or ()))
                        out.setdefault(grant, source)
    return out


# ----------------------------------------------------------------------------- requests
@dataclass(frozen=True)
class Request:
    verb: str
    group: str
    resource: str  # with "/subresource"
    namespace: str
    name: str
    allowed: bool


def request_of(event: dict[str, Any]) -> Request | None:
    ref = event.get("objectRef")
    if not ref or not ref.get("resource"):
        return None  # a non-resource URL (/api, /apis, /healthz, /metrics)
    verb = event.get("verb", "")
    if verb == "list" and "watch=true" in event.get("requestURI", "").replace("watch=1", "watch=true"):
        verb = "watch"
    resource = ref["resource"] + (f"/{ref['subresource']}" if ref.get("subresource") else "")
    decision = (event.get("annotations") or {}).get("authorization.k8s.io/decision")
    code = (event.get("responseStatus") or {}).get("code", 200)
    allowed = decision == "allow" if decision else code != 403
    return Request(verb, ref.get("apiGroup", ""), resource, ref.get("namespace", ""), ref.get("name", ""),
                   allowed)


def matches(grant: Grant, req: Request) -> bool:
    if grant.verb not in ("*", req.verb) or grant.group not in ("*", req.group):
        return False
    if grant.resource != "*" and grant.resource != req.resource:
        base, _, sub = grant.resource.partition("/")
        rbase, _, rsub = req.resource.partition("/")
        if not (base == "*" and sub == rsub) and not (sub == "*" and base == rbase):
            return False
    if grant.scope != "cluster" and grant.scope != f"namespace/{req.namespace}":
        return False
    return not grant.names or req.name in grant.names


@dataclass
class Usage:
    """One controller's measurement."""
    name: str
    serviceaccount: str
    granted: dict[Grant, str] = field(default_factory=dict)
    requests: dict[Request, int] = field(default_factory=dict)

    def status(self, grant: Grant) -> str:
        if any(r.allowed and matches(grant, r) for r in self.requests):
            return "used"
        if (grant.group, grant.resource.partition("/")[0]) in NOT_AUDITED:
            return "not audited"
        return "unused"

    def denied(self) -> list[Request]:
        return sorted((r for r in self.requests if not r.allowed), key=lambda r: (r.resource, r.verb))


def user_of(sa: str) -> str:
    namespace, name = sa.split("/")
    return f"system:serviceaccount:{namespace}:{name}"


def verdicts(usage: Usage, spec: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per unused or not-audited grant, and per removed entry, with its verdict."""
    def same(e: dict[str, Any], key: dict[str, str]) -> bool:
        return all(e.get(k) == v for k, v in key.items() if k != "names") and \
            str(e.get("names", "")) == key.get("names", "")

    justified = spec.get("justified") or []
    rows: list[dict[str, Any]] = []
    for grant, source in sorted(usage.granted.items()):
        status = usage.status(grant)
        if status == "used":
            continue
        key = grant.key
        reason = next((e["reason"] for e in justified if same(e, key)), None)
        removed = any(same(e, key) for e in spec.get("removed") or [])
        rows.append({**key, "status": status, "granted_by": source,
                     "verdict": reason or ("STILL GRANTED although listed as removed" if removed
                                           else "UNEXPLAINED"),
                     "ok": bool(reason)})
    for e in spec.get("removed") or []:
        if not any(same(e, g.key) for g in usage.granted):
            rows.append({"verb": e["verb"], "resource": e["resource"], "scope": e["scope"],
                         "status": "unused", "granted_by": e.get("from", ""), "verdict": "removed",
                         "ok": True})
    return rows


def stale_justifications(usage: Usage, spec: dict[str, Any]) -> list[str]:
    """Justified entries that are no longer granted-but-unused (used now, or not granted at all)."""
    open_keys = [g.key for g in usage.granted if usage.status(g) != "used"]
    return [entry_label(e) for e in spec.get("justified") or []
            if not any(all(e.get(k) == v for k, v in key.items() if k != "names") for key in open_keys)]


# ----------------------------------------------------------------------------- the cluster side
class Watcher:
    """Reads the new lines of every audit log under one state folder, and the RBAC bound to accounts."""

    def __init__(self, home: Path | None, users: Iterable[str],
                 clusters: list[tuple[Path, Path]] | None = None):
        """Watch every cluster under the state folder ``home``, or the (audit log, kubeconfig) pairs."""
        self.home = home
        self.clusters = clusters
        self.users = set(users)
        self.offsets: dict[Path, tuple[int, int]] = {}  # log -> (inode, offset)
        self.events: dict[str, list[dict[str, Any]]] = {u: [] for u in self.users}
        self.rbac: dict[str, dict[str, dict[str, Any]]] = {
            k: {} for k in ("roles", "clusterroles", "rolebindings", "clusterrolebindings")}

    def _logs(self) -> list[Path]:
        if self.clusters is not None:
            return [log for log, _ in self.clusters]
        return sorted(self.home.glob("**/audit.log")) if self.home else []

    def _configs(self) -> list[Path]:
        if self.clusters is not None:
            return [config for _, config in self.clusters]
        return sorted(self.home.glob("**/clusters/*/kubeconfig.yaml")) if self.home else []

    def read_audit(self) -> None:
        for log in self._logs():
            try:
                stat = log.stat()
                inode, offset = self.offsets.get(log, (stat.st_ino, 0))
                if inode != stat.st_ino or stat.st_size < offset:
                    offset = 0  # a new cluster of the same name
                with log.open("rb") as fh:
                    fh.seek(offset)
                    data = fh.read()
            except OSError:
                continue
            end = data.rfind(b"\n") + 1  # a half-written last line waits for the next read
            self.offsets[log] = (stat.st_ino, offset + end)
            for line in data[:end].splitlines():
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                user = (event.get("user") or {}).get("username", "")
                if user in self.users:
                    self.events[user].append(event)

    def read_rbac(self) -> None:
        from krmcourse.kubectl import kubectl_binary

        for config in self._configs():
            for kinds in ("roles,rolebindings", "clusterroles,clusterrolebindings"):
                done = subprocess.run([str(kubectl_binary()), "--kubeconfig", str(config), "get", kinds,
                                       "-A", "-o", "json", "--request-timeout=10s"],
                                      capture_output=True, text=True, timeout=30)
                if done.returncode != 0:
                    continue  # the cluster is going or gone
                for item in json.loads(done.stdout).get("items", []):
                    labels = item["metadata"].get("labels") or {}
                    if labels.get("kubernetes.io/bootstrapping") == "rbac-defaults":
                        continue  # the cluster's own roles: never bound to a lab's account by name
                    kind = {"Role": "roles", "ClusterRole": "clusterroles", "RoleBinding": "rolebindings",
                            "ClusterRoleBinding": "clusterrolebindings"}[item["kind"]]
                    key = f"{config.parent.name}/{item['metadata'].get('namespace', '')}/{item['metadata']['name']}"
                    old = self.rbac[kind].get(key)
                    if old is not None and kind in ("roles", "clusterroles"):
                        # a union over the run: rules an exercise added and a later cell took away count
                        rules = list(old.get("rules") or [])
                        rules += [r for r in item.get("rules") or [] if r not in rules]
                        item = {**item, "rules": rules}
                    self.rbac[kind][key] = item

    def rbac_lists(self) -> dict[str, list[dict[str, Any]]]:
        return {k: list(v.values()) for k, v in self.rbac.items()}


def _is_teardown(source: str) -> bool:
    return ".down(" in source or "reset(" in source


def run_notebook(notebook: Path, users: list[str], timeout: int = 900) -> tuple[Watcher, list[str], float]:
    """Run one notebook to its end in a fresh state folder; return what the watcher saw and any errors."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    home = Path(tempfile.mkdtemp(prefix="krmcourse-leastpriv-"))
    saved = {k: os.environ.get(k) for k in ("KRMCOURSE_HOME", "KRMCOURSE_SOLUTIONS")}
    os.environ["KRMCOURSE_HOME"] = str(home)
    os.environ["KRMCOURSE_SOLUTIONS"] = "apply"
    watcher = Watcher(home, users)
    errors: list[str] = []
    started = time.monotonic()
    try:
        nb = nbformat.read(notebook, as_version=4)
        client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                                resources={"metadata": {"path": str(notebook.parent)}})
        with client.setup_kernel():
            for index, cell in enumerate(nb.cells):
                if cell.cell_type != "code":
                    continue
                if _is_teardown(cell.source):
                    watcher.read_audit()
                    watcher.read_rbac()
                try:
                    client.execute_cell(cell, index)
                except CellExecutionError as exc:
                    errors.append(f"cell {index}: {str(exc).strip().splitlines()[-1][:300]}")
                watcher.read_audit()
                if "kubeconfig_for" in cell.source or index % 3 == 0:
                    watcher.read_rbac()
        watcher.read_audit()
        watcher.read_rbac()
    finally:
        _clean(home)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return watcher, errors, time.monotonic() - started


def _clean(home: Path) -> None:
    """Take down whatever the notebook left in its state folder, as the tests' session end does."""
    from krmcourse.processes import kill_recorded
    from krmcourse.providers.kwok import KwokProvider

    previous = os.environ.get("KRMCOURSE_HOME")
    os.environ["KRMCOURSE_HOME"] = str(home)
    try:
        for folder in (home / "labs").glob("*/processes"):
            kill_recorded(folder)
        provider = KwokProvider()
        for cluster in provider.clusters():
            provider.delete(cluster)
    finally:
        if previous is not None:
            os.environ["KRMCOURSE_HOME"] = previous
    shutil.rmtree(home, ignore_errors=True)


def usage_from(watcher: Watcher, spec: dict[str, Any]) -> Usage:
    usage = Usage(spec["name"], spec["serviceaccount"])
    usage.granted = grants_for(watcher.rbac_lists(), spec["serviceaccount"])
    for event in watcher.events.get(user_of(spec["serviceaccount"]), []):
        if (req := request_of(event)) is not None:
            usage.requests[req] = usage.requests.get(req, 0) + 1
    return usage


# ----------------------------------------------------------------------------- report
def table(rows: list[tuple[dict[str, Any], dict[str, Any]]]) -> str:
    lines = ["| controller | verb | resource | scope | seen | verdict |", "| --- | --- | --- | --- | --- | --- |"]
    for spec, row in rows:
        verdict = row["verdict"] if row["ok"] else f"**{row['verdict']}**"
        names = f" (names: {row['names']})" if row.get("names") else ""
        lines.append(f"| {spec['name']} | {row['verb']} | `{row['resource']}`{names} | {row['scope']} "
                     f"| {row['status']} | {verdict} |")
    return "\n".join(lines)


def select_controllers(data: dict[str, Any], wanted: list[str]) -> list[dict[str, Any]]:
    chosen = data["controllers"]
    if wanted:
        chosen = [c for c in chosen if any(w in (c["name"], c["lab"], c["notebook"], Path(c["notebook"]).stem)
                                           for w in wanted)]
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("only", nargs="*", help="controllers, labs or notebooks to measure (default: all)")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per cell")
    parser.add_argument("--no-save", action="store_true", help="do not write benchmarks/results/")
    args = parser.parse_args(argv)

    data = load_data()
    if problems := problems_in_data(data):
        print("\n".join(["least_privilege_justified.yaml is not well formed:", *problems]), file=sys.stderr)
        return 2
    controllers = select_controllers(data, args.only)
    if not controllers:
        print(f"no controller matches {args.only}", file=sys.stderr)
        return 2
    load_before = os.getloadavg()
    started = time.strftime("%Y-%m-%d %H:%M")
    by_notebook: dict[str, list[dict[str, Any]]] = {}
    for c in controllers:
        by_notebook.setdefault(c["notebook"], []).append(c)

    rows: list[tuple[dict[str, Any], dict[str, Any]]] = []
    result: dict[str, Any] = {"date": started, "host": platform.node(), "cpus": os.cpu_count(),
                              "load_before": load_before, "notebooks": {}, "controllers": {}}
    failed = False
    for nb_name, specs in by_notebook.items():
        print(f"== {nb_name}: {', '.join(c['name'] for c in specs)}", flush=True)
        watcher, errors, seconds = run_notebook(ROOT / "notebooks" / nb_name,
                                                [user_of(c["serviceaccount"]) for c in specs], args.timeout)
        result["notebooks"][nb_name] = {"seconds": round(seconds, 1), "errors": errors}
        print(f"   ran in {seconds:.0f} s" + (f", {len(errors)} failing cell(s)" if errors else ""), flush=True)
        for e in errors:
            print(f"   ! {e}")
        failed |= bool(errors)
        for spec in specs:
            usage = usage_from(watcher, spec)
            verdict_rows = [] if spec.get("not_run") else verdicts(usage, spec)
            rows += [(spec, r) for r in verdict_rows]
            stale = [] if spec.get("not_run") else stale_justifications(usage, spec)
            denied = usage.denied()
            used = sorted(g for g in usage.granted if usage.status(g) == "used")
            print(f"   {spec['name']}: {len(usage.granted)} granted, {len(used)} used, "
                  f"{sum(usage.requests.values())} requests, {len(denied)} kinds denied", flush=True)
            if spec.get("not_run"):
                rows.append((spec, {"verb": "-", "resource": "-", "scope": "-", "status": "not run",
                                    "verdict": f"not measured: {spec['not_run']}", "ok": True}))
                print(f"   {spec['name']}: not run by its notebook ({spec['not_run']})")
            elif not usage.granted or not usage.requests:
                print(f"   ! {spec['name']}: nothing {'granted' if not usage.granted else 'requested'} "
                      "seen: did the notebook run its controller?")
                failed = True
            for s in stale:
                print(f"   note: justified entry no longer open (used, or not granted): {s}")
            result["controllers"][spec["name"]] = {
                "lab": spec["lab"], "notebook": nb_name, "serviceaccount": spec["serviceaccount"],
                "granted": [{**g.key, "granted_by": src, "status": usage.status(g)}
                            for g, src in sorted(usage.granted.items())],
                "requests": [{"verb": r.verb, "resource": resource_label(r.group, r.resource),
                              "namespace": r.namespace, "name": r.name, "allowed": r.allowed, "count": n}
                             for r, n in sorted(usage.requests.items(), key=lambda kv: (kv[0].resource, kv[0].verb))],
                "denied": sorted({f"{r.verb} {resource_label(r.group, r.resource)} {r.namespace or '(cluster)'}"
                                  for r in denied}),
                "verdicts": verdict_rows, "stale_justifications": stale,
            }
    result["load_after"] = os.getloadavg()
    print()
    print(f"Measured {started}, load average before {load_before[0]:.2f}, after {result['load_after'][0]:.2f} "
          f"({os.cpu_count()} CPUs)")
    print()
    print(table(rows))
    for name, c in result["controllers"].items():
        if c["denied"]:
            print(f"\n{name} was refused: " + "; ".join(c["denied"]))
    unexplained = [(s["name"], r) for s, r in rows if not r["ok"]]
    result["unexplained"] = [f"{n}: {entry_label(r)}" for n, r in unexplained]
    if not args.no_save:
        from record import save  # benchmarks/record.py: run as a script, this folder is on sys.path

        save("least_privilege", result)
    if unexplained:
        print(f"\n{len(unexplained)} granted-but-unused entr{'y has' if len(unexplained) == 1 else 'ies have'} "
              "no reason: remove it from the lab's RBAC or justify it in least_privilege_justified.yaml")
    return 1 if unexplained or failed else 0


if __name__ == "__main__":
    sys.exit(main())
