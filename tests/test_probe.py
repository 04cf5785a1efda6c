"""The start-up probe reads a real API server with a kubeconfig's own credentials, or steps aside."""

from __future__ import annotations

import base64
import os
import tempfile
from pathlib import Path

import pytest
import yaml

from krmcourse import probe
from krmcourse.webhooks import make_tls

pytestmark = pytest.mark.cluster


def _rewrite(source: Path, target: Path, change) -> Path:
    config = yaml.safe_load(source.read_text())
    change(config["clusters"][0]["cluster"], config["users"][0]["user"])
    target.write_text(yaml.safe_dump(config))
    return target


def test_a_probe_reads_the_cluster_with_the_kubeconfig_certificates(sandbox):
    fast = probe.for_kubeconfig(sandbox.kubeconfig)
    assert fast is not None
    try:
        assert fast.ready()
        assert fast.get_json("/api/v1/namespaces/default/serviceaccounts/default")["metadata"]["name"] == "default"
        assert fast.get_json("/api/v1/namespaces/default/configmaps/not-there") is None
    finally:
        fast.close()


def test_inline_credentials_work_and_leave_no_file_behind(sandbox, tmp_path):
    def inline(cluster, user):
        # kwokctl names files; kind writes its kubeconfig inline already.
        for entry, field in ((cluster, "certificate-authority"), (user, "client-certificate"), (user, "client-key")):
            if field in entry:
                entry[f"{field}-data"] = base64.b64encode(Path(entry.pop(field)).read_bytes()).decode()
            assert f"{field}-data" in entry

    before = set(os.listdir(tempfile.gettempdir()))
    fast = probe.for_kubeconfig(_rewrite(sandbox.kubeconfig, tmp_path / "inline.yaml", inline))
    try:
        assert fast is not None and fast.ready()
    finally:
        fast.close()
    assert not {n for n in set(os.listdir(tempfile.gettempdir())) - before if n.startswith("krmcourse-tls-")}


def test_a_token_is_sent_and_rbac_still_applies(sandbox, namespace):
    sandbox.kubectl("create", "serviceaccount", "reader", "-n", namespace)
    fast = probe.for_kubeconfig(sandbox.kubeconfig_for("reader", namespace))
    assert fast is not None and "Authorization" in fast.headers
    try:
        status, _ = fast.get(f"/api/v1/namespaces/{namespace}/secrets")
        assert status == 403  # authenticated as the ServiceAccount, which may not list secrets
    finally:
        fast.close()


def test_a_server_vouched_for_by_another_ca_reads_as_not_ready(sandbox, tmp_path):
    other = make_tls(tmp_path / "other", hosts=["127.0.0.1"]).ca_cert  # a CA that never signed the server's

    def distrust(cluster, _user):
        cluster.pop("certificate-authority-data", None)
        cluster["certificate-authority"] = str(other)

    fast = probe.for_kubeconfig(_rewrite(sandbox.kubeconfig, tmp_path / "other.yaml", distrust))
    assert fast is not None
    assert not fast.ready()
    assert fast.get("/readyz") == (None, b"")


def test_credentials_it_does_not_understand_leave_the_work_to_kubectl(sandbox, tmp_path):
    def exec_plugin(_cluster, user):
        user.clear()
        user["exec"] = {"apiVersion": "client.authentication.k8s.io/v1", "command": "true"}

    assert probe.for_kubeconfig(_rewrite(sandbox.kubeconfig, tmp_path / "exec.yaml", exec_plugin)) is None

