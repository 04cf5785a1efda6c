"""The composite lab: the WebApp controller converges after a crash, adopts only with consent, and
composes a provisioner-style Bucket that the provisioner turns into a cloud bucket.

Everything runs against a real lab cluster: the garbage collector, the ReplicaSet controller, the
scheduler and kwok's simulated nodes are all real, so "Ready" below means pods are available.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import kubernetes
import pytest
from kubernetes.dynamic import DynamicClient

from krmcourse import Lab
from krmcourse.labcode import lab_module

LABS = Path(__file__).resolve().parent.parent / "labs"
comp = lab_module("composite", "composite_support")

WEBAPP = "web.krmcourse.dev/v1alpha1"


@pytest.mark.parametrize("manifest", ["10-bucket-crd.yaml", "20-provisioner-rbac.yaml"])
def test_provisioner_manifests_are_exact_copies(manifest: str) -> None:
    """The composite lab carries the provisioner lab's CRD and RBAC; they must not drift apart."""
    original = (LABS / "provisioner" / "manifests" / manifest).read_text()
    assert (LABS / "composite" / "manifests" / manifest).read_text() == original


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    lab = Lab("composite", instance="tests").up()
    yield lab
    comp.provisioner_lab().stop_all(lab)
    lab.down()


def _webapp(name: str, **spec: object) -> dict:
    return {"apiVersion": WEBAPP, "kind": "WebApp", "metadata": {"name": name, "namespace": comp.TEAM},
            "spec": spec}


def _owned_kinds(lab: Lab, name: str) -> list[str]:
    return sorted(o["kind"] for o in comp.children(lab, name))


@pytest.mark.cluster
def test_webapp_controller_converges_after_sigkill_mid_work(lab: Lab) -> None:
    controller = comp.start_controller(lab)
    lab.apply([_webapp("k1"), _webapp("k2", replicas=1)])
    lab.wait_until(lambda: lab.get("deployment", "k1", namespace=comp.TEAM), timeout=60,
                   message="the controller never started on k1")
    controller.kill()  # mid-work: children exist, rollouts are going on, status is behind
    assert not controller.alive
    lab.delete("service", "k1", namespace=comp.TEAM)
    lab.kubectl("patch", "webapp", "k2", "-n", comp.TEAM, "--type=merge", "-p", '{"spec": {"replicas": 3}}')
    lab.apply(_webapp("k3", message="made while the controller was down"))
    controller.restart()
    for name, replicas in (("k1", 2), ("k2", 3), ("k3", 2)):
        app = comp.wait_ready(lab, name, timeout=90)
        assert app["status"]["availableReplicas"] == replicas
        # k1's Ready status dates from before the kill (its spec did not change), so the Service deleted
        # meanwhile comes back only once the restarted controller's re-list reaches k1.
        lab.wait_until(lambda n=name: _owned_kinds(lab, n) == ["ConfigMap", "Deployment", "Service"], timeout=60,
                       message=f"the restarted controller never rebuilt the children of {name}")
    assert lab.get("configmap", "k3-config", namespace=comp.TEAM)["data"]["MESSAGE"].startswith("made while")


@pytest.mark.cluster
def test_adoption_needs_consent_and_garbage_collection_follows_owners(lab: Lab) -> None:
    comp.start_controller(lab)
    lab.apply({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "taken-config", "namespace": comp.TEAM}, "data": {"x": "1"}})
    lab.apply(_webapp("taken"))
    app = comp.wait_reason(lab, "taken", "ChildConflict")
    assert "ConfigMap taken-config already exists" in comp.ready(app)["message"]
    assert comp.controller_of(lab.get("configmap", "taken-config", namespace=comp.TEAM)) is None
    lab.kubectl("label", "configmap", "taken-config", "-n", comp.TEAM, "app.kubernetes.io/part-of=taken")
    app = comp.wait_ready(lab, "taken", timeout=90)
    adopted = lab.get("configmap", "taken-config", namespace=comp.TEAM)
    assert comp.controller_of(adopted)["uid"] == app["metadata"]["uid"]
    lab.delete("webapp", "taken", namespace=comp.TEAM)
    lab.wait_until(lambda: all(lab.get(k, n, namespace=comp.TEAM) is None for k, n in
                               [("deployment", "taken"), ("service", "taken"), ("configmap", "taken-config")]),
                   timeout=60, message="the garbage collector left children of taken behind")


@pytest.mark.cluster
def test_webapp_composes_a_bucket_that_the_provisioner_makes(lab: Lab) -> None:
    prov = comp.provisioner_lab()
    cloud = prov.start_cloud(lab)
    prov.start_provisioner(lab)
    comp.start_controller(lab)
    lab.apply(_webapp("store", bucket={"enabled": True, "storageClass": "NEARLINE"}))
    app = comp.wait_ready(lab, "store", timeout=90)
    bucket = lab.get("bucket", "store-assets", namespace=comp.TEAM)
    assert comp.controller_of(bucket)["uid"] == app["metadata"]["uid"]
    assert cloud.get_bucket("web-store-assets")["storageClass"] == "NEARLINE"
    assert app["status"]["bucketURL"] == bucket["status"]["url"]
    config = lab.get("configmap", "store-config", namespace=comp.TEAM)["data"]
    assert config["BUCKET_URL"] == bucket["status"]["url"]
    # Turning the bucket off removes the Bucket, and the provisioner's finalizer removes the cloud bucket.
    lab.kubectl("patch", "webapp", "store", "-n", comp.TEAM, "--type=merge",
                "-p", '{"spec": {"bucket": {"enabled": false}}}')
    try:
        lab.wait_until(lambda: lab.get("bucket", "store-assets", namespace=comp.TEAM) is None, timeout=60)
    except TimeoutError:
        left = lab.get("bucket", "store-assets", namespace=comp.TEAM) or {}
        pytest.fail(f"the unwanted Bucket was never deleted (waited 60 s); its metadata: {left.get('metadata')}\n"
                    f"the provisioner's log ends:\n{lab.logs('provisioner', lines=60)}", pytrace=False)
    assert cloud.get_bucket("web-store-assets") is None
    assert comp.wait_ready(lab, "store")["status"]["bucketURL"] == ""


@pytest.mark.cluster
def test_a_reconcile_under_way_does_not_take_back_children_orphaned_meanwhile(
        lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    """``kubectl delete --cascade=orphan`` lands while a reconcile is between reading and writing.

    The garbage collector strips the children's ownerReferences; if the reconcile then applied them as it
    read them, the ownerReferences would be back, pointing at a deleted WebApp, and the collector would
    delete the children it was told to keep (it did, in about one orphan-delete in three, under load).
    The controller's own reconcile runs here, in the test, with the delete made at the worst moment: after
    its last look at the owner, before it writes the children.
    """
    controller = comp.start_controller(lab)
    lab.apply(_webapp("race"))
    comp.wait_ready(lab, "race", timeout=90)
    controller.stop()  # only the reconcile below writes the children now
    webapp = lab_module("composite", "controllers.webapp")
    monkeypatch.setattr(webapp, "_client", DynamicClient(kubernetes.config.new_client_from_config(
        config_file=str(lab.kubeconfig))))
    children = [("configmap", "race-config"), ("deployment", "race"), ("service", "race")]

    def orphaned(kind: str, name: str) -> bool:
        child = lab.get(kind, name, namespace=comp.TEAM)
        return child is not None and not child["metadata"].get("ownerReferences")

    def deleted_with_orphan_after_the_last_look(app: dict, now: dict | None) -> bool:
        verdict = real_going(app, now)
        if now is not app:  # the reconcile's second read of the owner, which still saw it
            lab.kubectl("delete", "webapp", "race", "-n", comp.TEAM, "--cascade=orphan", "--wait=true")
            lab.wait_until(lambda: all(orphaned(k, n) for k, n in children), timeout=60,
                           message="the garbage collector never orphaned race's children")
        return verdict

    real_going = webapp.going
    monkeypatch.setattr(webapp, "going", deleted_with_orphan_after_the_last_look)
    webapp.reconcile(comp.TEAM, "race", logging.getLogger("test"))
    assert lab.get("webapp", "race", namespace=comp.TEAM) is None
    taken_back = [f"{k}/{n}" for k, n in children if not orphaned(k, n)]
    assert not taken_back, f"the reconcile gave the deleted WebApp its children back: {taken_back}"
