"""Saved states of a running lab: ``reset`` (and ``reset --at``) restore one instead of replaying the lab.

A snapshot is taken the first time a cluster reaches a state: ``start`` when its manifests are applied,
``at-<exercise>`` when every exercise before that one has been solved by its reference solution. It holds

- every key etcd keeps under ``/registry/``, read straight from etcd (the API server's whole state), except
  Leases: who holds a lease, and when it last renewed, belong to the processes running now;
- the learner code the lab keeps in ``<home>/code``;
- how each lab process that ran then (controllers, a cloud, a webhook server) was started.

Restoring one stops the lab's processes, writes the difference between etcd now and the snapshot into
etcd (in as few transactions as etcd's default limits allow; revisions move forward as for any write, so
the API server and every watch see ordinary changes), puts the code back, and starts the processes again,
waiting for each declared controller's ready line. It writes while kube-controller-manager is stopped,
and starts it afresh: its garbage collector remembers owners it saw go, and would delete their restored
children. The cluster itself keeps running, so its kubeconfig and certificates stay valid; a snapshot
of an earlier cluster of the lab (etcd's cluster id differs) is never written into a new one.

Snapshots live in the lab's state folder and go with its cluster (``down``). Each records a fingerprint
of the lab's folder: a snapshot taken before the lab changed is never restored. A snapshot that does not
read back whole (a half-written or damaged file) is deleted and the lab replays instead, saying so; a disk
too full to save one leaves the lab running, and says so. ``KRMCOURSE_SNAPSHOTS=off`` turns them off.
"""

from __future__ import annotations

import base64
import errno
import hashlib
import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import ClusterError
from .paths import private_file
from .processes import kill_recorded, running_starts, start_again
from .providers.base import b64, range_request

if TYPE_CHECKING:
    from .lab import Lab

FORMAT = 1
ROOT = "/registry/"
#: Keys a restore neither writes nor deletes: leases belong to the processes that hold them now.
KEEP = ("/registry/leases/", "/registry/masterleases/")
ENV = "KRMCOURSE_SNAPSHOTS"
CONTROLLER_MANAGER_LEASE = "/registry/leases/kube-system/kube-controller-manager"
#: Seconds a restored event lives: the API server's own default (--event-ttl=1h).
EVENT_TTL = 3600


def enabled(lab: Lab) -> bool:
    """Whether this lab's provider can read etcd, and snapshots are not switched off."""
    return os.environ.get(ENV, "on") != "off" and lab.provider.can("etcd")


def fingerprint(lab_path: Path) -> str:
    """A digest of every file of the lab's folder: a changed lab never restores an older snapshot."""
    digest = hashlib.sha256(str(FORMAT).encode())
    for path in sorted(lab_path.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and ".ipynb_checkpoints" not in path.parts:
            digest.update(str(path.relative_to(lab_path)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def folder(lab: Lab) -> Path:
    return lab.home / "snapshots"


def path(lab: Lab, state: str) -> Path:
    return folder(lab) / f"{state}.json"


def state_at(exercise: str | None) -> str:
    """The name of the state in which ``exercise`` is next (``start``: none solved yet)."""
    return f"at-{exercise}" if exercise else "start"


def _etcd(lab: Lab) -> tuple[dict[str, str], str]:
    """Every key under ROOT that a restore may change (base64 key -> base64 value), and etcd's cluster id:
    a snapshot of another cluster of the same name (made again since) is never written into this one."""
    answer = lab.provider.etcd_call(lab.cluster, "kv/range", range_request(ROOT, prefix=True))
    kvs = {kv["key"]: kv.get("value", "") for kv in answer.get("kvs") or []}
    return {k: v for k, v in kvs.items() if not _kept(k)}, str(answer.get("header", {}).get("cluster_id"))


def _kept(key_b64: str) -> bool:
    return base64.b64decode(key_b64).decode(errors="replace").startswith(KEEP)


def _digest(body: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def save(lab: Lab, state: str) -> Path | None:
    """Snapshot the lab as it is now, as ``state``; None, said, when it could not (a full disk, say)."""
    if not enabled(lab):
        return None
    try:
        etcd, cluster_id = _etcd(lab)
    except Exception as exc:  # noqa: BLE001 - a snapshot is an optimisation: the lab runs on without it
        lab.say(f"Lab {lab.name}: could not read etcd to save the {state} snapshot ({exc}); the lab runs on, "
                "and a later reset makes a new cluster instead of restoring.")
        return None
    code = lab.home / "code"
    body = {
        "format": FORMAT, "lab": lab.name, "cluster": lab.cluster, "state": state, "taken": time.time(),
        "fingerprint": fingerprint(lab.path),
        "etcd": etcd, "etcd_cluster": cluster_id,
        "code": {p.name: p.read_text() for p in sorted(code.glob("*.py"))} if code.is_dir() else {},
        "processes": running_starts(lab.home / "processes"),
    }
    target = path(lab, state)
    scratch = target.with_suffix(".json.new")
    try:
        private_file(scratch, json.dumps({**body, "sha256": _digest(body)}))
        scratch.replace(target)  # a reader sees the old snapshot or the whole new one
    except OSError as exc:
        scratch.unlink(missing_ok=True)
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            lab.say(f"Lab {lab.name}: no room on the disk to save the {state} snapshot; the lab runs on, and a "
                    "later reset replays it instead of restoring. Free some space to get quick resets back.")
        else:
            lab.say(f"Lab {lab.name}: could not save the {state} snapshot ({exc}); the lab runs on, and a later "
                    "reset replays it instead of restoring.")
        return None
    return target


def load(lab: Lab, state: str) -> dict[str, Any] | None:
    """The snapshot of ``state``, or None: missing, of another version of the lab, or damaged (deleted,
    and said)."""
    target = path(lab, state)
    if not enabled(lab) or not target.is_file():
        return None
    snapshot: dict[str, Any] = {}
    try:
        read = json.loads(target.read_text())
        if isinstance(read, dict):
            snapshot = read
        whole = snapshot.pop("sha256", None) == _digest(snapshot) and bool(snapshot)
    except (OSError, ValueError):
        whole = False
    if not whole:
        target.unlink(missing_ok=True)
        lab.say(f"Lab {lab.name}: the {state} snapshot was damaged (half-written, or changed on disk); deleted "
                "it, and replaying the lab instead.")
        return None
    if snapshot.get("format") != FORMAT or snapshot.get("fingerprint") != fingerprint(lab.path) \
            or snapshot.get("cluster") != lab.cluster:
        target.unlink(missing_ok=True)
        lab.say(f"Lab {lab.name}: the {state} snapshot was taken of another version of the lab; deleted it, "
                "and replaying the lab instead.")
        return None
    return snapshot


def _is_event(key_b64: str) -> bool:
    return base64.b64decode(key_b64).startswith(b"/registry/events/")


def _changes(now: dict[str, str], saved: dict[str, str]) -> list[dict[str, Any]]:
    """The etcd operations that turn ``now`` into ``saved``."""
    ops: list[dict[str, Any]] = [{"request_delete_range": {"key": k}} for k in now if k not in saved]
    return ops + [{"request_put": {"key": k, "value": v}} for k, v in saved.items() if now.get(k) != v]


#: etcd's default limits on one transaction, which the labs keep (the anti-patterns lab measures them).
MAX_OPS, MAX_BYTES = 128, 1024 * 1024


def _batches(ops: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """``ops`` in transactions etcd accepts: at most MAX_OPS operations and MAX_BYTES of JSON each."""
    batches: list[list[dict[str, Any]]] = [[]]
    size = 0
    for op in ops:
        length = len(json.dumps(op))
        if batches[-1] and (len(batches[-1]) == MAX_OPS or size + length > MAX_BYTES):
            batches.append([])
            size = 0
        batches[-1].append(op)
        size += length
    return [b for b in batches if b]


def restore(lab: Lab, state: str) -> bool:
    """Put the lab back in ``state`` if a good snapshot of it exists; False (nothing changed) if not."""
    snapshot = load(lab, state)
    if snapshot is None:
        return False
    started = time.monotonic()
    now, cluster_id = _etcd(lab)
    if snapshot.get("etcd_cluster") != cluster_id:
        path(lab, state).unlink(missing_ok=True)
        lab.say(f"Lab {lab.name}: the {state} snapshot was taken of an earlier cluster of this lab; deleted it, "
                "and replaying the lab instead.")
        return False
    kill_recorded(lab.home / "processes")  # the controllers start again on the restored state
    saved: dict[str, str] = snapshot["etcd"]
    changes = 0

    def write() -> None:
        nonlocal changes
        current, _ = _etcd(lab)  # read again: until now, kube-controller-manager could still act
        ops = _changes(current, saved)
        if any("request_put" in op and _is_event(op["request_put"]["key"]) for op in ops):
            lease = lab.provider.etcd_call(lab.cluster, "lease/grant", {"TTL": EVENT_TTL})["ID"]
            for op in ops:  # the API server gives events a lease, so that they go in time; a restored one too
                if "request_put" in op and _is_event(op["request_put"]["key"]):
                    op["request_put"]["lease"] = lease
        # With leader election on (kubeadm's way), a new kube-controller-manager would wait out the lease
        # of the one that just stopped.
        ops.append({"request_delete_range": {"key": b64(CONTROLLER_MANAGER_LEASE)}})
        for batch in _batches(ops):
            answer = lab.provider.etcd_call(lab.cluster, "kv/txn", {"success": batch})
            if "header" not in answer:
                raise ClusterError(f"Lab {lab.name}: etcd refused to restore the {state} snapshot: {answer}.",
                                   f"'krmcourse down {lab.name}' and 'krmcourse up {lab.name}' start it afresh.")
        changes = len(ops) - 1

    if _changes(now, saved):
        # kube-controller-manager is down while etcd is written, and starts again with nothing remembered:
        # its garbage collector remembers owners it saw go, by uid, and would delete a restored owner's
        # restored children; and it would act on a restore written in several transactions half-way.
        lab.provider.restart_component(lab.cluster, "kube-controller-manager", meanwhile=write)
    code = lab.home / "code"
    for old in code.glob("*.py") if code.is_dir() else []:
        if old.name not in snapshot["code"]:
            old.unlink()
    for name, text in snapshot["code"].items():
        private_file(code / name, text)
    controllers = lab.spec.controllers
    for name, start in snapshot["processes"].items():
        if name in controllers and controllers[name].serviceaccount:
            lab.controller_kubeconfig(name)  # a fresh token: the one on disk may have expired since
        proc = start_again(lab.home / "processes", name, start)
        ready = controllers[name].ready if name in controllers else None
        if ready:
            proc.wait_for_log(ready, timeout=60)
    lab.say(f"Lab {lab.name}: restored the {state} snapshot ({changes} changes, "
            f"{len(snapshot['processes'])} processes started) in {time.monotonic() - started:.1f} s.")
    return True


