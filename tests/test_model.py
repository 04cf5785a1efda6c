"""What the welcome, resource-model and custom-resources labs promise beyond their exercises.

The raw client speaks to the API server with only a kubeconfig; one YAML file creates the same object
through kubectl and through a raw POST; etcd holds custom resources as JSON at their resourceVersion;
watches stop without leaking a thread; a denied request is audited; and the MemoryStore CRD helpers make
the API server refuse bad objects, scale, and migrate its storage version for real.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from krmcourse import CheckFailed, Lab, credentials
from krmcourse.labcode import lab_module
from krmcourse.webhooks import make_tls

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "labs" / "resource-model"
CRDS = ROOT / "labs" / "custom-resources"
PLANTS = "plants.garden.krmcourse.dev"


wire = lab_module("resource-model", "krm_wire")
inspect_ = lab_module("resource-model", "krm_inspect")
memorystore_crd = lab_module("custom-resources", "memorystore_crd")


# ---------------------------------------------------------------- no cluster needed
def test_server_filled_lists_only_what_the_server_added() -> None:
    sent = {"metadata": {"name": "a", "labels": {"x": "1"}}, "spec": {"species": "s"}}
    stored = {"metadata": {"name": "a", "labels": {"x": "1"}, "uid": "u", "managedFields": [{"m": 1}]},
              "spec": {"species": "s", "wateringIntervalHours": 24}}
    assert inspect_.server_filled(sent, stored) == ["metadata.uid", "metadata.managedFields",
                                                    "spec.wateringIntervalHours"]


def test_anatomy_says_who_set_each_part() -> None:
    sent = {"apiVersion": "garden.krmcourse.dev/v1", "kind": "Plant", "metadata": {"name": "a"}, "spec": {}}
    stored = {**sent, "metadata": {"name": "a", "uid": "u"}, "spec": {"wateringIntervalHours": 24}}
    rows = {r["part"]: r for r in inspect_.anatomy(sent, stored)}
    assert rows["apiVersion: group"]["value"] == "garden.krmcourse.dev"
    assert rows["metadata.name"]["set by"] == "you"
    assert rows["metadata.uid"]["set by"] == "API server"
    assert rows["metadata.finalizers"]["set by"] == "(not set)"
    assert rows["spec.wateringIntervalHours"]["set by"] == "API server"


def test_storage_keys_of_core_and_grouped_kinds() -> None:
    assert inspect_.storage_key("/registry", "", "configmaps", "ns", "x") == "/registry/configmaps/ns/x"
    assert inspect_.storage_key("/registry/", "g.io", "plants", "ns", "x") == "/registry/g.io/plants/ns/x"


def _kubeconfig(path: Path, user: dict) -> Path:
    tls = make_tls(path.parent / "tls", hosts=["127.0.0.1"])
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "c",
              "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:1",
                                                      "certificate-authority": str(tls.ca_cert)}}],
              "users": [{"name": "u", "user": user(tls) if callable(user) else user}],
              "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}]}
    path.write_text(yaml.safe_dump(config))
    return path


def test_raw_client_reads_certificates_or_a_token(tmp_path: Path) -> None:
    cert_config = _kubeconfig(tmp_path / "cert.yaml", lambda tls: {"client-certificate": str(tls.cert),
                                                                   "client-key": str(tls.key)})
    conn = credentials.connection(cert_config)
    assert conn.server == "https://127.0.0.1:1" and conn.headers == {}
    token_config = _kubeconfig(tmp_path / "token.yaml", {"token": "abc"})
    assert credentials.connection(token_config).headers == {"Authorization": "Bearer abc"}


def test_raw_client_explains_what_a_kubeconfig_lacks(tmp_path: Path) -> None:
    with pytest.raises(credentials.KubeconfigError, match="neither a token nor a client certificate"):
        credentials.connection(_kubeconfig(tmp_path / "anon.yaml", {}))
    with pytest.raises(credentials.KubeconfigError, match="exec that only kubectl understands"):
        credentials.connection(_kubeconfig(tmp_path / "exec.yaml", {"exec": {"command": "true"}}))
    with wire.RawClient(_kubeconfig(tmp_path / "t.yaml", {"token": "abc"})) as raw:
        with pytest.raises(ValueError, match="apiVersion and kind"):
            raw.post_yaml("metadata: {name: x}\n")


def _exercise(lab_dir: Path, exercise: str) -> ModuleType:
    return lab_module(lab_dir.name, f"exercises.{exercise}")


# ---------------------------------------------------------------- resource-model cluster
# Class-scoped, so that each lab's cluster is down before the next class starts one.
@pytest.fixture(scope="class")
def model_lab() -> Iterator[Lab]:
    lab = Lab("resource-model", say=lambda _m: None).reset()
    yield lab
    lab.down()


@pytest.fixture(scope="class")
def crd_lab() -> Iterator[Lab]:
    lab = Lab("custom-resources", say=lambda _m: None).reset()
    yield lab
    lab.down()


@pytest.mark.cluster
class TestResourceModel:
    @pytest.fixture
    def lab(self, model_lab: Lab) -> Lab:
        return model_lab

    @pytest.fixture
    def raw(self, model_lab: Lab) -> Iterator:
        with wire.RawClient(model_lab.kubeconfig) as client:
            yield client

    def test_one_file_through_kubectl_and_a_raw_post(self, lab: Lab, raw) -> None:
        text = (MODEL / "files" / "rosemary.yaml").read_text()
        lab.kubectl("apply", "-f", "-", input=text.replace("name: rosemary", "name: rosemary-kubectl"))
        reply = raw.post_yaml(text.replace("name: rosemary", "name: rosemary-raw"))
        assert reply.status == 201, reply.message
        assert reply.body["spec"] == lab.get(PLANTS, "rosemary-kubectl", "model")["spec"]
        again = raw.post_yaml(text.replace("name: rosemary", "name: rosemary-raw"))
        assert (again.status, again.reason) == (409, "AlreadyExists")

    def test_the_shipped_fern_is_refused_with_a_status(self, raw) -> None:
        reply = raw.post_yaml((MODEL / "files" / "fern.yaml").read_text())
        assert (reply.status, reply.reason) == (422, "Invalid")
        assert "spec.wateringIntervalHours" in reply.message

    def test_hello_namespace_check_explains_a_namespace_being_deleted(self, lab: Lab) -> None:
        # The welcome lab's check reads only a Namespace, so any lab cluster can host this test.
        hello = _exercise(ROOT / "labs" / "welcome", "hello-namespace")
        lab.apply({"apiVersion": "v1", "kind": "Namespace",
                   "metadata": {"name": "hello", "finalizers": ["krmcourse.dev/hold"]}})
        try:
            hello.check(lab)
            lab.delete("namespace", "hello", wait=False)
            with pytest.raises(CheckFailed, match="being deleted"):
                hello.check(lab)
        finally:
            lab.kubectl("patch", "namespace", "hello", "--type=json",
                        "-p", '[{"op": "remove", "path": "/metadata/finalizers"}]', check=False)
            lab.delete("namespace", "hello", wait=False)

    def test_a_fern_created_by_kubectl_does_not_count_as_a_raw_post(self, lab: Lab) -> None:
        text = (MODEL / "files" / "fern.yaml").read_text().replace("every two days", "48")
        lab.kubectl("create", "-f", "-", input=text)
        try:
            with pytest.raises(CheckFailed, match="kubectl-create"):
                _exercise(MODEL, "post-a-plant").check(lab)
        finally:
            lab.delete(PLANTS, "fern", "model")

    def test_a_viewer_with_too_many_rights_fails_the_check(self, lab: Lab) -> None:
        lab.kubectl("create", "role", "plant-admin", "-n", "model", "--verb=*",
                    "--resource=plants.garden.krmcourse.dev")
        lab.kubectl("create", "rolebinding", "too-much", "-n", "model", "--role=plant-admin",
                    "--serviceaccount=model:viewer")
        viewer = _exercise(MODEL, "viewer-can-list")

        def hint() -> str | None:  # RBAC changes reach the authorizer's cache within moments
            try:
                viewer.check(lab)
            except CheckFailed as failed:
                return str(failed) if "more than it needs" in str(failed) else None
            return None

        try:
            message = lab.wait_until(hint, timeout=15, message="the check never objected to extra rights")
            assert "delete plants" in message
        finally:
            lab.kubectl("delete", "rolebinding", "too-much", "-n", "model")
            lab.kubectl("delete", "role", "plant-admin", "-n", "model")

    def test_etcd_holds_the_plant_as_json_at_its_resource_version(self, lab: Lab) -> None:
        flags = inspect_.apiserver_flags(lab)
        assert "etcd-servers" in flags
        key = inspect_.storage_key(flags.get("etcd-prefix", "/registry"), "garden.krmcourse.dev", "plants",
                                   "model", "basil")
        entry = inspect_.etcd_get(lab, key)
        basil = lab.get(PLANTS, "basil", "model")
        assert entry is not None and entry.json()["spec"] == basil["spec"]
        assert str(entry.mod_revision) == basil["metadata"]["resourceVersion"]

    def test_a_stale_write_conflicts(self, raw) -> None:
        path = "/api/v1/namespaces/model/configmaps/greeting"
        read = raw.get(path).body
        # A write that changes nothing keeps the resourceVersion, so each write must change something.
        assert raw.put(path, read | {"data": {"text": "first"}}).status == 200
        stale = raw.put(path, read | {"data": {"text": "second"}})
        assert (stale.status, stale.reason) == (409, "Conflict")

    def test_a_watch_sees_every_change_in_order_and_stops_cleanly(self, lab: Lab, raw) -> None:
        rv = raw.get("/api/v1/namespaces/model/configmaps").body["metadata"]["resourceVersion"]
        before = threading.active_count()
        watch = raw.watch("/api/v1/namespaces/model/configmaps", resource_version=rv)
        for n in range(3):
            lab.kubectl("patch", "configmap", "greeting", "-n", "model", "--type=merge",
                        "-p", json.dumps({"data": {"text": f"t{n}"}}))
        watch.wait_for(3)
        assert [row["data.text"] for row in watch.rows("data.text")] == ["t0", "t1", "t2"]
        watch.stop()
        assert not watch.running and watch.error is None
        assert threading.active_count() == before

    def test_a_denied_request_is_refused_and_audited(self, lab: Lab) -> None:
        with wire.RawClient(lab.kubeconfig_for("nobody", "model"), user_agent="audit-probe/1") as nobody:
            denied = nobody.get("/apis/garden.krmcourse.dev/v1/namespaces/model/plants")
        assert (denied.status, denied.reason) == (403, "Forbidden")
        records = lab.wait_until(lambda: [r for r in inspect_.audit_records(
            lab.audit_log, username="system:serviceaccount:model:nobody", code=403)
            if r.get("userAgent") == "audit-probe/1"], timeout=20, message="no audit record")
        summary = inspect_.audit_summary(records[-1])
        assert summary["decision"] == "forbid" and summary["resource"] == PLANTS


# ---------------------------------------------------------------- custom-resources cluster
@pytest.mark.cluster
class TestCustomResources:
    @pytest.fixture
    def lab(self, crd_lab: Lab) -> Lab:
        return crd_lab

    @pytest.mark.parametrize(("spec", "message"), [
        ({"engine": "mongodb", "sizeGi": 1}, 'Unsupported value: "mongodb"'),
        ({"engine": "redis", "sizeGi": 1, "contact": "nobody"}, "must be of type email"),
        ({"engine": "memcached", "sizeGi": 1, "persistence": True}, "only supported by the redis engine"),
        ({"engine": "redis", "sizeGi": 1, "colour": "red"}, 'unknown field "spec.colour"'),
        ({"sizeGi": 1}, "spec.engine: Required value"),
    ])
    def test_the_schema_refuses_bad_stores(self, lab: Lab, spec: dict, message: str) -> None:
        verdict = memorystore_crd.try_create(lab, memorystore_crd.memory_store("probe", **spec))
        assert not verdict.allowed and message in verdict.message, verdict

    def test_defaults_are_filled_in_and_nothing_is_stored_by_a_dry_run(self, lab: Lab) -> None:
        verdict = memorystore_crd.try_create(lab, memorystore_crd.memory_store("probe", engine="redis", sizeGi=1))
        assert verdict.allowed
        assert verdict.object["spec"] == {"engine": "redis", "sizeGi": 1, "replicas": 1, "evictionPolicy": "lru"}
        assert lab.get("memorystores.store.krmcourse.dev", "probe", "store") is None

    def test_scale_subresource_drives_spec_replicas(self, lab: Lab) -> None:
        memorystore_crd.enable_scale(lab)
        lab.kubectl("scale", "memorystores.store.krmcourse.dev/sessions", "-n", "store", "--replicas=4")
        assert lab.get("memorystores.store.krmcourse.dev", "sessions", "store")["spec"]["replicas"] == 4

    def test_a_storage_migration_leaves_only_the_new_version_stored(self, lab: Lab) -> None:
        memorystore_crd.add_storage_version(lab, new="v2", old="v1")
        assert memorystore_crd.crd(lab)["status"]["storedVersions"] == ["v1", "v2"]
        assert sorted(memorystore_crd.migrate_storage(lab, to="v2")) == ["store/primary", "store/sessions"]
        assert memorystore_crd.crd(lab)["status"]["storedVersions"] == ["v2"]
        old = memorystore_crd.run_kubectl(lab, "get", "memorystores.v1.store.krmcourse.dev", "primary", "-n", "store",
                                    "-o", "json")
        assert old.allowed and old.object["apiVersion"] == "store.krmcourse.dev/v1" and "deprecated" in old.message
