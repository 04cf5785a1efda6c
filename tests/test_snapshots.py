"""Snapshots (krmcourse.snapshots): ``reset`` and ``reset --at`` put a running lab back in a saved state.

One composite lab serves the module, taken to its last exercise once by replaying the solutions (which
snapshots each state on the way); each test then resets it to the state it needs. Marked
``every_provider``: etcd is reached differently in a kind node, and kube-controller-manager is replaced
there by the kubelet.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
from collections.abc import Iterator

import pytest

from krmcourse import Lab, doctor, exercises, snapshots

pytestmark = [pytest.mark.cluster, pytest.mark.every_provider]

LAST = "pin-to-node"
TEAM = "web"


class Said(list[str]):
    def __contains__(self, text: object) -> bool:
        return any(str(text) in line for line in self)


@pytest.fixture(scope="module")
def said() -> Said:
    return Said()


@pytest.fixture(scope="module")
def lab(said: Said) -> Iterator[Lab]:
    lab = Lab("composite", instance="snapshots", say=said.append)
    try:
        lab.reset(at=LAST)
        yield lab
    finally:
        lab.down()


def _solved(lab: Lab) -> dict[str, bool]:
    return {ex.id: lab.solved(ex.id) for ex in lab.spec.exercises}


def _children(lab: Lab, owner: str) -> dict[str, str]:
    """kind/name -> uid of what the WebApp ``owner`` owns."""
    items = lab.objects("deployments,services,configmaps", TEAM)
    return {f"{o['kind']}/{o['metadata']['name']}": o["metadata"]["uid"] for o in items
            if any(r.get("name") == owner for r in o["metadata"].get("ownerReferences") or [])}


def _garbage_collector_has_caught_up(lab: Lab) -> None:
    """A ConfigMap owned by a WebApp uid that never existed is deleted once the garbage collector runs
    and has seen it: after that, whatever it meant to delete among the restored objects is gone too."""
    owner = {"apiVersion": "web.krmcourse.dev/v1alpha1", "kind": "WebApp", "name": "nobody",
             "uid": "00000000-0000-0000-0000-000000000000"}
    lab.apply({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "dangling", "namespace": TEAM, "ownerReferences": [owner]}})
    lab.wait_until(lambda: lab.get("configmap", "dangling", namespace=TEAM) is None, timeout=120,
                   message="the garbage collector never deleted a ConfigMap whose owner does not exist")


def test_reset_at_an_exercise_restores_its_snapshot_in_place(lab: Lab, said: Said) -> None:
    server, kubeconfig = lab.server, lab.kubeconfig.read_text()
    controller = lab.running()["webapp-controller"]
    before = _children(lab, "shop")
    assert len(before) == 3, before
    lab.kubectl("create", "configmap", "junk", "-n", TEAM)
    lab.kubectl("delete", "webapp", "shop", "-n", TEAM, "--wait=true")  # the garbage collector takes its children
    lab.wait_until(lambda: not _children(lab, "shop"), timeout=120, message="shop's children outlived it")

    said.clear()
    lab.reset(at=LAST)
    assert f"restored the at-{LAST} snapshot" in said and "solving" not in said and "is ready in" not in said, said
    assert lab.server == server and lab.kubeconfig.read_text() == kubeconfig  # the same cluster, the same credentials
    assert lab.get("configmap", "junk", namespace=TEAM) is None
    # The children come back as they were, and the garbage collector, which saw their owner go, leaves them.
    _garbage_collector_has_caught_up(lab)
    assert _children(lab, "shop") == before
    assert _solved(lab) == {"orphan-children": True, "adopt-service": True, LAST: False}
    assert lab.running()["webapp-controller"] != controller  # started again, on the restored state
    # A snapshot and a process record hold an environment and etcd's contents: the owner's alone.
    for private in (snapshots.path(lab, f"at-{LAST}"), lab.home / "processes" / "webapp-controller.pid"):
        assert private.stat().st_mode & 0o777 == 0o600, private


def test_reset_restores_the_start(lab: Lab, said: Said) -> None:
    many = snapshots.MAX_OPS + 30  # more changes than etcd takes in one transaction
    lab.apply([{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"extra-{i}", "namespace": TEAM}}
               for i in range(many)])
    lab.check("orphan-children")  # solved in the state the module's lab starts from
    assert (exercises.last_result(lab, "orphan-children") or {}).get("state") == "solved"
    said.clear()
    lab.reset()
    assert "restored the start snapshot" in said and "solving" not in said, said
    assert exercises.last_result(lab, "orphan-children") is None, "a reset kept what the checks said before it"
    assert not [c for c in lab.objects("configmaps", TEAM)
                if c["metadata"]["name"].startswith("extra-")]
    assert _solved(lab) == {"orphan-children": False, "adopt-service": False, LAST: False}
    assert "webapp-controller" not in lab.running()  # the lab starts with no controller running
    # up --at on a running lab keeps the learner's work, and solves on top of it.
    lab.kubectl("create", "configmap", "mine", "-n", TEAM)
    said.clear()
    lab.up(at="adopt-service")
    assert "restored" not in said and "solving orphan-children" in said, said
    assert lab.get("configmap", "mine", namespace=TEAM) is not None


def test_an_owner_made_again_with_a_new_uid_gets_its_own_children_back(lab: Lab, said: Said) -> None:
    lab.reset(at=LAST)
    before = _children(lab, "shop")
    owner_uid = lab.get("webapp", "shop", namespace=TEAM)["metadata"]["uid"]
    lab.kubectl("delete", "webapp", "shop", "-n", TEAM, "--wait=true")
    lab.wait_until(lambda: not _children(lab, "shop"), timeout=120, message="shop's children outlived it")
    lab.apply(lab.support("composite_support").starting_objects("shop"))  # the same names, new uids
    lab.wait_until(lambda: _children(lab, "shop").keys() & before.keys(), timeout=120,
                   message="shop was not made again")  # whatever the controller can make again, with new uids
    said.clear()
    lab.reset(at=LAST)  # every key is there: only values change, old uids among them
    assert f"restored the at-{LAST} snapshot" in said, said
    _garbage_collector_has_caught_up(lab)
    assert lab.get("webapp", "shop", namespace=TEAM)["metadata"]["uid"] == owner_uid
    assert _children(lab, "shop") == before


def test_a_damaged_snapshot_is_deleted_and_the_way_there_replayed(lab: Lab, said: Said) -> None:
    damaged = snapshots.path(lab, "at-adopt-service")
    damaged.write_text(damaged.read_text()[:1000])  # half-written
    said.clear()
    lab.reset(at="adopt-service")
    assert "the at-adopt-service snapshot was damaged" in said, said
    # The latest good state on the way is the start: from there only orphan-children is solved again.
    assert "restored the start snapshot" in said and "solving orphan-children" in said, said
    assert _solved(lab) == {"orphan-children": True, "adopt-service": False, LAST: False}
    assert snapshots.load(lab, "at-adopt-service") is not None  # taken again on the way


def test_a_full_disk_while_saving_leaves_the_lab_running_and_says_so(lab: Lab, said: Said) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a small tmpfs as the full disk")
    full = snapshots.folder(lab)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(full)], check=True)
    try:
        said.clear()
        assert snapshots.save(lab, "no-room") is None
        assert "no room on the disk to save the no-room snapshot; the lab runs on" in said, said
        assert not list(full.iterdir())  # no half-written file left
    finally:
        subprocess.run(["umount", str(full)], check=True)
    assert lab.get("namespace", TEAM) is not None


def test_changes_go_to_etcd_in_transactions_it_accepts() -> None:
    puts = [{"request_put": {"key": "a2V5", "value": "x" * 1000}} for _ in range(300)]
    batches = snapshots._batches(puts)
    assert [len(b) for b in batches] == [128, 128, 44]
    big = [{"request_put": {"key": "a2V5", "value": "x" * 400_000}} for _ in range(5)]
    assert [len(b) for b in snapshots._batches(big)] == [2, 2, 1]  # about 1 MiB of JSON at most


def test_doctor_reports_the_disk_snapshots_use(lab: Lab) -> None:
    found = [f.what for f in doctor.examine() if "lab snapshot(s) take" in f.what]
    assert found and "MiB" in found[0], found


def test_a_restore_that_etcd_refuses_makes_the_cluster_again(lab: Lab, said: Said) -> None:
    lab.reset()
    start = snapshots.path(lab, "start")
    body = json.loads(start.read_text())
    body.pop("sha256")
    # A value over etcd's request limit (1.5 MiB), as the API server would never have written: etcd refuses it.
    body["etcd"][base64.b64encode(b"/registry/configmaps/web/too-big").decode()] = \
        base64.b64encode(b"x" * (2 * 1024 * 1024)).decode()
    start.write_text(json.dumps({**body, "sha256": snapshots._digest(body)}))
    server = lab.server
    said.clear()
    lab.reset()
    assert "restoring a snapshot failed" in said and "is ready in" in said, said
    assert lab.api.version()  # a working cluster, made again
    assert lab.server != server or lab.get("configmap", "too-big", namespace=TEAM) is None
    assert snapshots.load(lab, "start") is not None  # the new cluster's own


def test_a_snapshot_of_another_version_of_the_lab_is_never_restored(
        lab: Lab, said: Said, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snapshots, "fingerprint", lambda _path: "an edited lab")
    said.clear()
    lab.reset()
    assert "the start snapshot was taken of another version of the lab" in said, said
    assert "is ready in" in said, said  # no snapshot left to restore: a new cluster


def test_snapshots_switched_off_reset_makes_a_new_cluster(
        lab: Lab, said: Said, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(snapshots.ENV, "off")
    said.clear()
    lab.reset()
    assert "is ready in" in said and "restored" not in said, said
    assert not snapshots.folder(lab).exists()
