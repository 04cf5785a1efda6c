"""What a lab cluster must do, asserted against a real API server (issue: lab clusters)."""

from __future__ import annotations

import json
import subprocess
import threading

import pytest

from krmcourse import KubectlError

pytestmark = [pytest.mark.cluster, pytest.mark.every_provider]

WIDGET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.test.krmcourse.dev"},
    "spec": {
        "group": "test.krmcourse.dev",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "versions": [{
            "name": "v1", "served": True, "storage": True,
            "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {"spec": {
                    "type": "object",
                    "properties": {"size": {"type": "string", "enum": ["small", "large"]},
                                   "count": {"type": "integer", "minimum": 1}},
                }},
            }},
        }],
    },
}


def widget(name: str, namespace: str, size: str = "small") -> dict:
    return {"apiVersion": "test.krmcourse.dev/v1", "kind": "Widget",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"size": size, "count": 1}}


@pytest.fixture(scope="module")
def crd(sandbox):
    sandbox.apply(WIDGET_CRD)
    sandbox.wait_for("crd/widgets.test.krmcourse.dev", "condition=Established", timeout=30)
    return sandbox


def test_crd_is_served_and_validation_is_enforced(crd, namespace):
    crd.apply(widget("ok", namespace))
    assert crd.get("widget", "ok", namespace=namespace)["spec"]["size"] == "small"
    with pytest.raises(KubectlError) as bad:
        crd.apply(widget("bad", namespace, size="enormous"))
    assert "Unsupported value" in bad.value.stderr and "enormous" in bad.value.stderr
    assert crd.get("widget", "bad", namespace=namespace) is None


def test_custom_resource_can_be_watched(crd, namespace):
    seen: list[str] = []
    kubectl = subprocess.Popen(
        [*_kubectl(crd), "get", "widgets", "-n", namespace, "--watch", "-o", "json", "--request-timeout=20s"],
        stdout=subprocess.PIPE, text=True)

    def read() -> None:
        assert kubectl.stdout is not None
        decoder, buffer = json.JSONDecoder(), ""
        for line in kubectl.stdout:
            buffer += line
            try:
                obj, _ = decoder.raw_decode(buffer.strip())
            except ValueError:
                continue
            buffer = ""
            seen.append(obj["metadata"]["name"])

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        crd.apply(widget("watched", namespace))
        crd.wait_until(lambda: "watched" in seen, timeout=20, message="the watch never saw the new Widget")
    finally:
        kubectl.terminate()
        kubectl.wait(5)


def test_server_side_apply_tracks_field_managers(sandbox, namespace):
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shared", "namespace": namespace},
          "data": {"colour": "blue"}}
    sandbox.apply(cm, server_side=True, field_manager="alice")
    other = {**cm, "data": {"colour": "red"}}
    with pytest.raises(KubectlError) as conflict:
        sandbox.apply(other, server_side=True, field_manager="bob")
    assert "conflict" in conflict.value.stderr.lower() and "alice" in conflict.value.stderr
    sandbox.kubectl("apply", "--server-side", "--force-conflicts", "--field-manager=bob", "-f", "-",
                    input=json.dumps(other))
    live = sandbox.get("configmap", "shared", namespace, show_managed_fields=True)
    managers = {m["manager"] for m in live["metadata"]["managedFields"]}
    assert "bob" in managers


def test_deleting_an_owner_garbage_collects_its_dependents(sandbox, namespace):
    sandbox.kubectl("create", "configmap", "owner", "-n", namespace)
    owner = sandbox.get("configmap", "owner", namespace)
    dependent = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "dependent", "namespace": namespace,
        "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
                             "uid": owner["metadata"]["uid"]}]}}
    sandbox.apply(dependent)
    sandbox.delete("configmap", "owner", namespace)
    sandbox.wait_until(lambda: sandbox.get("configmap", "dependent", namespace) is None, timeout=30,
                       message="the garbage collector did not delete the dependent")


def test_deployment_pods_run_on_a_simulated_node(sandbox, namespace):
    sandbox.kubectl("create", "deployment", "web", "--image=nginx", "--replicas=2", "-n", namespace)
    sandbox.wait_for("deployment/web", "condition=Available", namespace=namespace, timeout=60)
    pods = sandbox.objects("pods", namespace)
    assert len(pods) == 2
    assert {p["status"]["phase"] for p in pods} == {"Running"}
    assert {p["spec"]["nodeName"] for p in pods} <= {"kwok-node-0"}


def test_namespace_deletion_completes(sandbox):
    sandbox.kubectl("create", "namespace", "short-lived")
    sandbox.kubectl("create", "configmap", "x", "-n", "short-lived")
    sandbox.kubectl("delete", "namespace", "short-lived", "--timeout=60s")
    assert sandbox.get("namespace", "short-lived") is None


def test_rbac_denies_a_serviceaccount_without_permission(sandbox, namespace):
    sandbox.kubectl("create", "serviceaccount", "nobody", "-n", namespace)
    config = sandbox.kubeconfig_for("nobody", namespace)
    assert oct(config.stat().st_mode & 0o777) == "0o600"
    denied = sandbox.kubectl_as("nobody", namespace, "get", "secrets", "-n", namespace)
    assert "forbidden" in denied and f"system:serviceaccount:{namespace}:nobody" in denied


def test_audit_log_records_requests(sandbox, namespace):
    sandbox.kubectl("create", "configmap", "audited", "-n", namespace)
    def found() -> bool:
        for line in sandbox.audit_log.read_text().splitlines():
            event = json.loads(line)
            ref = event.get("objectRef", {})
            if event["verb"] == "create" and ref.get("name") == "audited" and ref.get("namespace") == namespace:
                return True
        return False
    sandbox.wait_until(found, timeout=20, message="no audit record of the create")


def _kubectl(lab) -> list[str]:
    from krmcourse.kubectl import kubectl_binary

    return [str(kubectl_binary()), "--kubeconfig", str(lab.kubeconfig),
            f"--cache-dir={lab.kubeconfig.parent / '.kubectl-cache'}"]


def test_wait_for_outlasts_conditions_that_are_still_null(sandbox, namespace):
    """kubectl wait gives up at once on ``status.conditions: null`` (a CRD a moment after its creation
    looks like that); Lab.wait_for keeps asking until the condition is there."""
    sandbox.apply({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.test.krmcourse.dev"},
        "spec": {"group": "test.krmcourse.dev", "scope": "Namespaced",
                 "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                     "type": "object", "properties": {"status": {"type": "object", "properties": {
                         "conditions": {"type": "array", "nullable": True,
                                        "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                     }}}}}}]},
    })
    sandbox.wait_for("crd/gadgets.test.krmcourse.dev", "condition=Established", timeout=30)
    # create, not apply: apply would read the null as "remove this field"
    sandbox.kubectl("create", "-f", "-", input=json.dumps({
        "apiVersion": "test.krmcourse.dev/v1", "kind": "Gadget",
        "metadata": {"name": "g", "namespace": namespace}, "status": {"conditions": None}}))
    assert sandbox.get("gadget", "g", namespace=namespace)["status"] == {"conditions": None}
    plain = subprocess.run([*_kubectl(sandbox), "wait", "gadget/g", "-n", namespace, "--for=condition=Ready",
                            "--timeout=10s"], capture_output=True, text=True)
    assert plain.returncode != 0 and "conditions accessor error: <nil>" in plain.stderr  # kubectl alone

    def become_ready():
        sandbox.kubectl("patch", "gadget", "g", "-n", namespace, "--type=merge",
                        "-p", '{"status": {"conditions": [{"type": "Ready", "status": "True"}]}}')

    later = threading.Timer(1.5, become_ready)
    later.start()
    try:
        assert "condition met" in sandbox.wait_for("gadget/g", "condition=Ready", namespace=namespace, timeout=30)
    finally:
        later.join()


def _kubectl(lab) -> list[str]:
    from krmcourse.kubectl import kubectl_binary

    return [str(kubectl_binary()), "--kubeconfig", str(lab.kubeconfig)]
