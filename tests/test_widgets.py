"""The notebook widgets, tested through their data models: on hand-made objects, and on real objects
that kube-controller-manager creates (Deployment → ReplicaSet → Pods) in the shared sandbox cluster."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from krmcourse.widgets import (
    EventTimeline,
    OwnershipGraph,
    OwnershipTree,
    collect_namespace,
    describe_change,
    entries_from_events,
    render_text,
)
from krmcourse.widgets.timeline import writer


def obj(kind: str, name: str, uid: str, owners: tuple[tuple[str, bool], ...] = ()) -> dict:
    refs = [{"uid": o, "controller": c, "kind": "X", "name": o, "apiVersion": "v1"} for o, c in owners]
    return {"kind": kind, "metadata": {"name": name, "namespace": "n", "uid": uid, "ownerReferences": refs}}


def test_graph_builds_the_tree_under_a_root_and_marks_non_controller_owners() -> None:
    graph = OwnershipGraph(
        [
            obj("Deployment", "web", "d"),
            obj("ReplicaSet", "web-1", "r", (("d", True),)),
            obj("Pod", "web-1-a", "p1", (("r", True),)),
            obj("Pod", "web-1-b", "p2", (("r", True),)),
            obj("ConfigMap", "shared", "c", (("d", False),)),
            obj("Secret", "alone", "s"),
        ]
    )
    tree = graph.tree(graph.find("deployment", "web") or "")
    assert len(tree) == 5 and [n.ref.name for n in tree.find("pod")] == ["web-1-a", "web-1-b"]
    assert graph.roots() == ["d"]
    assert "[owner, not controller]" in render_text(tree)
    assert graph.find("secret", "missing") is None


def test_graph_cuts_ownership_cycles_and_rejects_objects_without_kind() -> None:
    graph = OwnershipGraph([obj("A", "a", "1", (("2", True),)), obj("B", "b", "2", (("1", True),))])
    assert len(graph.tree("1")) == 2
    with pytest.raises(ValueError, match="kind"):
        OwnershipGraph([{"metadata": {"name": "x", "uid": "u"}}])


def test_describe_change_names_finalizers_spec_and_condition_flips() -> None:
    old = {"metadata": {"resourceVersion": "1", "finalizers": []}, "spec": {"a": 1}, "status": {}}
    new = {
        "metadata": {"resourceVersion": "2", "finalizers": ["x/y"]},
        "spec": {"a": 2},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }
    assert describe_change(old, new) == "+finalizer x/y, spec, status (Ready=True)"
    assert describe_change(None, new) == ""


def test_writer_is_the_manager_whose_entry_grew_not_the_one_that_lost_fields() -> None:
    create = {"manager": "create", "operation": "Update", "time": "t1", "fieldsV1": {"f:data": {"f:a": {}}}}
    before = {"metadata": {"managedFields": [create]}}
    after = {
        "metadata": {
            "managedFields": [
                {**create, "fieldsV1": {"f:data": {}}},  # same second; lost f:a to the patch
                {"manager": "patch", "operation": "Update", "time": "t1", "fieldsV1": {"f:data": {"f:a": {}}}},
            ]
        }
    }
    assert writer(before, after) == "patch"
    assert writer(after, after) == ""


def test_events_are_filtered_to_the_window_with_either_timestamp_shape() -> None:
    start = datetime(2026, 1, 1, 12, 0, 0, 500000, tzinfo=UTC)
    end = start + timedelta(seconds=5)
    events = [
        {
            "eventTime": "2026-01-01T12:00:01.250000Z",
            "involvedObject": {"kind": "Pod", "name": "p"},
            "reason": "Precise",
            "reportingComponent": "me",
        },
        {
            "lastTimestamp": "2026-01-01T12:00:00Z",
            "involvedObject": {"kind": "Pod", "name": "p"},
            "reason": "SameSecond",
            "source": {"component": "kcm"},
        },
        {"eventTime": "2026-01-01T11:59:59.000000Z", "reason": "Before"},
        {"lastTimestamp": "2026-01-01T12:00:09Z", "reason": "After"},
    ]
    entries = entries_from_events(events, start, end)
    assert sorted(e.what for e in entries) == ["Precise", "SameSecond"]
    assert {e.what: e.precise for e in entries} == {"Precise": True, "SameSecond": False}


@pytest.mark.cluster
def test_ownership_tree_follows_a_real_deployment(sandbox, namespace: str, without_kubectl) -> None:
    sandbox.kubectl("create", "deployment", "web", "--image=nginx", "--replicas=2", "-n", namespace)
    sandbox.wait_until(
        lambda: len([o for o in collect_namespace(sandbox, namespace) if o["kind"] == "Pod"]) == 2,
        timeout=60,
        message="the Deployment's pods never appeared",
    )
    with without_kubectl():  # a live tree refreshes every 2 s: no process per refresh
        tree = OwnershipTree(sandbox, "deployment", "web", namespace=namespace)
        tree.refresh()
    [replicaset] = tree.root.find("ReplicaSet")
    assert replicaset.controller and len(replicaset.children) == 2
    assert all(p.ref.kind == "Pod" for p in replicaset.children)
    assert "└─ ReplicaSet/web-" in str(tree)
    with pytest.raises(LookupError, match="no deployment called 'nope'"):
        OwnershipTree(sandbox, "deployment", "nope", namespace=namespace)


@pytest.mark.cluster
def test_event_timeline_records_watch_events_and_kubernetes_events_in_order(sandbox, namespace: str) -> None:
    with EventTimeline(sandbox, namespace, ["configmaps", "deployments.apps"], settle=1.5) as quiet:
        pass
    assert not [e for e in quiet.entries if e.name == "cfg"], "nothing happened, so nothing is recorded"

    with EventTimeline(sandbox, namespace, ["configmaps", "deployments.apps"], settle=1.5) as timeline:
        sandbox.kubectl("create", "configmap", "cfg", "--from-literal=a=1", "-n", namespace)
        sandbox.kubectl("patch", "configmap", "cfg", "-n", namespace, "-p", '{"data":{"a":"2"}}')
        sandbox.kubectl("delete", "configmap", "cfg", "-n", namespace)
        sandbox.kubectl("create", "deployment", "api", "--image=nginx", "-n", namespace)
    mine = [(e.what, e.detail) for e in timeline.entries if e.kind == "ConfigMap" and e.name == "cfg"]
    assert mine == [("ADDED", ""), ("MODIFIED", "data"), ("DELETED", "")]
    assert [e.by for e in timeline.entries if e.name == "cfg" and e.what == "MODIFIED"] == ["kubectl-patch"]
    assert any(e.source == "event" and e.what == "ScalingReplicaSet" for e in timeline.entries), (
        "the deployment controller's Event should be in the window"
    )
    assert timeline.entries == sorted(timeline.entries)
    assert "ConfigMap/cfg" in str(timeline) and "<table>" in timeline._repr_html_()
