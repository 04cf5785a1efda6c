"""Saved states of a running lab: ``reset`` and ``up --at`` restore one instead of replaying the lab.

A snapshot is taken the first time a cluster reaches a state: ``start`` when its manifests are applied,
``at-<exercise>`` when every exercise before that one has been solved by its reference solution. It holds

- every key etcd keeps under ``/registry/``, read straight from etcd (the API server's whole state), except
  Leases: who holds a lease, and when it last renewed, belong to the processes running now;
- the learner code the lab keeps in ``<home>/code``;
- how each lab process that ran then (controllers, a cloud, a webhook server) was started.

Restoring one stops the lab's processes, writes the difference between etcd now and the snapshot into
etcd (in as few transactions as etcd's default limits allow; revisions move forward as for any write, so
the API server and every watch see ordinary changes), puts the code back, and starts the processes again,
waiting for each declared controller's ready line. When the restore makes objects again, it writes while
kube-controller-manager is stopped, and starts it afresh: its garbage collector remembers owners it saw
go, and would delete their restored children. The cluster itself keeps running, so its kubeconfig and
certificates stay valid.

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

if TYPE_CHECKING:
    from .lab import Lab

FORMAT = 1
ROOT = "/registry/"
#: Keys a restore neither writes nor deletes: leases belong to the processes that hold them now.
KEEP = ("/registry/leases/", "/registry/masterleases/")
ENV = "KRMCOURSE_SNAPSHOTS"


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


def _etcd(lab: Lab) -> dict[str, str]:
    kvs = lab.provider.etcd_range(lab.cluster, ROOT, prefix=True)
    return {kv["key"]: kv.get("value", "") for kv in kvs}


def _kept(key_b64: str) -> bool:
    return base64.b64decode(key_b64).decode(errors="replace").startswith(KEEP)


def _digest(body: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def save(lab: Lab, state: str) -> Path | None:
    """Snapshot the lab as it is now, as ``state``; None (said) when the disk has no room for it."""
    if not enabled(lab):
        return None
    code = lab.home / "code"
    body = {
        "format": FORMAT, "lab": lab.name, "cluster": lab.cluster, "state": state, "taken": time.time(),
        "fingerprint": fingerprint(lab.path),
        "etcd": {k: v for k, v in _etcd(lab).items() if not _kept(k)},
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
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        lab.say(f"Lab {lab.name}: no room on the disk to save the {state} snapshot; the lab runs on, and a "
                "later reset replays it instead of restoring. Free some space to get quick resets back.")
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
    kill_recorded(lab.home / "processes")  # the controllers start again on the restored state
    now = {k: v for k, v in _etcd(lab).items() if not _kept(k)}
    saved: dict[str, str] = snapshot["etcd"]
    ops: list[dict[str, Any]] = [{"request_delete_range": {"key": k}} for k in now if k not in saved]
    ops += [{"request_put": {"key": k, "value": v}} for k, v in saved.items() if now.get(k) != v]

    def write() -> None:
        for batch in _batches(ops):
            answer = lab.provider.etcd_call(lab.cluster, "kv/txn", {"success": batch})
            if "header" not in answer:
                raise ClusterError(f"Lab {lab.name}: etcd refused to restore the {state} snapshot: {answer}.",
                                   f"'krmcourse down {lab.name}' and 'krmcourse up {lab.name}' start it afresh.")

    if any(k not in now for k in saved):
        # The garbage collector remembers owners it found gone, by uid, and deletes any dependent that
        # names one: a restored owner would lose its restored children. So kube-controller-manager is
        # down while etcd is written, and starts again with nothing remembered.
        lab.provider.restart_component(lab.cluster, "kube-controller-manager", meanwhile=write)
    elif ops:
        write()
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
    lab.say(f"Lab {lab.name}: restored the {state} snapshot ({len(ops)} changes, "
            f"{len(snapshot['processes'])} processes started) in {time.monotonic() - started:.1f} s.")
    return True


