"""The start-up probe reads a real API server with a kubeconfig's own credentials, or steps aside."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from krmcourse import probe
from krmcourse.credentials import as_files
from krmcourse.webhooks import make_tls

pytestmark = [pytest.mark.cluster, pytest.mark.every_provider]


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


def inline(cluster, user):
    """Carry the kubeconfig's credentials inline, as kind writes them (the lab's own kubeconfig names files)."""
    for entry, field in ((cluster, "certificate-authority"), (user, "client-certificate"), (user, "client-key")):
        if field in entry:
            entry[f"{field}-data"] = base64.b64encode(Path(entry.pop(field)).read_bytes()).decode()
        assert f"{field}-data" in entry


def test_inline_credentials_work_and_leave_no_file_behind(sandbox, tmp_path):
    before = set(os.listdir(tempfile.gettempdir()))
    fast = probe.for_kubeconfig(_rewrite(sandbox.kubeconfig, tmp_path / "inline.yaml", inline))
    try:
        assert fast is not None and fast.ready()
    finally:
        fast.close()
    assert not {n for n in set(os.listdir(tempfile.gettempdir())) - before if n.startswith("krmcourse-tls-")}


def test_inline_credentials_become_private_files_that_clients_read(sandbox, tmp_path):
    config = _rewrite(sandbox.kubeconfig, tmp_path / "inline.yaml", inline)
    as_files(config, tmp_path / "pki")
    text = config.read_text()
    assert "-data" not in text
    files = sorted((tmp_path / "pki").iterdir())
    assert [f.name.rsplit("-", 1)[-1] for f in files] == ["ca.crt", "client.crt", "client.key"]
    assert all(f.stat().st_mode & 0o777 == 0o600 for f in [*files, config])
    assert all(str(f) in text for f in files)
    fast = probe.for_kubeconfig(config)
    try:
        assert fast is not None and fast.ready()
    finally:
        fast.close()


def test_no_client_copies_a_labs_credentials_into_the_temp_folder(sandbox, namespace, tmp_path):
    """kr8s writes a kubeconfig's inline credentials to new temporary files for every client, and never
    removes them. The lab's kubeconfigs name files in its state folder instead."""
    sandbox.kubectl("create", "serviceaccount", "reader", "-n", namespace)
    temp = tmp_path / "temp"
    temp.mkdir()
    client = "import kr8s, sys; print(kr8s.api(kubeconfig=sys.argv[1]).version()['gitVersion'])"
    for config in (sandbox.kubeconfig, sandbox.kubeconfig_for("reader", namespace)):
        done = subprocess.run([sys.executable, "-c", client, str(config)], env={**os.environ, "TMPDIR": str(temp)},
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.startswith("v")
        assert not list(temp.iterdir()), f"a kr8s client with {config.name} left {sorted(temp.iterdir())}"


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

