"""The kind provider's contract, against a fake ``kind`` that records its calls.

kind needs a container engine and a node image, neither of which this machine has, so these tests
check what krmcourse asks kind to do, and the real preflight failure when no engine answers.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from krmcourse import Lab, ProviderError
from krmcourse.providers import ClusterOptions, select
from krmcourse.providers.kind import KindProvider

FAKE_KIND = r'''#!/usr/bin/env python3
"""A stand-in for kind: records each call, keeps a list of "clusters", writes a kubeconfig."""
import json, os, sys
log = os.environ["FAKE_KIND_LOG"]
state = log + ".clusters"
args = sys.argv[1:]
with open(log, "a") as fh:
    fh.write(json.dumps(args) + "\n")
names = open(state).read().split() if os.path.exists(state) else []
def opt(flag):
    return args[args.index(flag) + 1] if flag in args else None
if args[:2] == ["create", "cluster"]:
    names.append(opt("--name"))
    with open(opt("--kubeconfig"), "w") as fh:
        fh.write("apiVersion: v1\nkind: Config\nclusters: [{name: kind, cluster: {server: 'https://127.0.0.1:6443'}}]\n")
elif args[:2] == ["delete", "cluster"]:
    names = [n for n in names if n != opt("--name")]
elif args[:2] == ["get", "clusters"]:
    print("\n".join(names))
open(state, "w").write(" ".join(names))
'''


@pytest.fixture
def fake_kind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    kind = bin_dir / "kind"
    kind.write_text(FAKE_KIND.replace("#!/usr/bin/env python3", f"#!{sys.executable}"))
    kind.chmod(kind.stat().st_mode | stat.S_IEXEC)
    log = tmp_path / "kind-calls.jsonl"
    monkeypatch.setenv("FAKE_KIND_LOG", str(log))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return log


def calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_create_asks_kind_for_a_loopback_cluster_with_a_private_kubeconfig(fake_kind, monkeypatch):
    monkeypatch.setenv("KRMCOURSE_KIND_PREFLIGHT", "0")
    provider = KindProvider()
    provider.create(ClusterOptions(cluster="krm-sandbox"), say=lambda _m: None)
    create = calls(fake_kind)[0]
    assert create[:4] == ["create", "cluster", "--name", "krm-sandbox"]
    config = yaml.safe_load(Path(create[create.index("--config") + 1]).read_text())
    assert config["networking"]["apiServerAddress"] == "127.0.0.1"
    kubeconfig = Path(create[create.index("--kubeconfig") + 1])
    assert kubeconfig == provider.kubeconfig("krm-sandbox")
    assert oct(kubeconfig.stat().st_mode & 0o777) == "0o600"
    assert provider.exists("krm-sandbox")
    assert "--wait" in create


def test_a_fixed_port_is_passed_to_kind(fake_kind, monkeypatch):
    monkeypatch.setenv("KRMCOURSE_KIND_PREFLIGHT", "0")
    KindProvider().create(ClusterOptions(cluster="krm-sandbox", port=38123), say=lambda _m: None)
    create = calls(fake_kind)[0]
    config = yaml.safe_load(Path(create[create.index("--config") + 1]).read_text())
    assert config["networking"]["apiServerPort"] == 38123


def test_delete_removes_the_cluster_and_the_folder(fake_kind, monkeypatch):
    monkeypatch.setenv("KRMCOURSE_KIND_PREFLIGHT", "0")
    provider = KindProvider()
    provider.create(ClusterOptions(cluster="krm-sandbox"), say=lambda _m: None)
    provider.delete("krm-sandbox")
    assert ["delete", "cluster", "--name", "krm-sandbox"] == calls(fake_kind)[-1][:4]
    assert not provider.folder("krm-sandbox").exists()
    assert not provider.exists("krm-sandbox")


def test_clusters_lists_only_course_clusters(fake_kind, monkeypatch):
    monkeypatch.setenv("KRMCOURSE_KIND_PREFLIGHT", "0")
    Path(str(fake_kind) + ".clusters").write_text("someone-else krm-welcome")
    assert KindProvider().clusters() == ["krm-welcome"]


def test_without_a_container_engine_kind_refuses_clearly(fake_kind, monkeypatch, tmp_path):
    # This machine has no Docker engine: the real preflight must say so, and nothing is created.
    monkeypatch.delenv("KRMCOURSE_KIND_PREFLIGHT", raising=False)
    monkeypatch.setenv("KIND_EXPERIMENTAL_PROVIDER", "docker")
    engine = subprocess.run(["docker", "info"], capture_output=True) if _has("docker") else None
    if engine is not None and engine.returncode == 0:
        pytest.skip("a Docker engine is running here, so the no-engine path cannot be shown")
    with pytest.raises(ProviderError, match="kind provider cannot run here") as err:
        KindProvider().create(ClusterOptions(cluster="krm-sandbox"), say=lambda _m: None)
    assert "KRMCOURSE_PROVIDER=kwok" in err.value.hint
    assert calls(fake_kind) == []
    lab = Lab("sandbox", provider="kind")
    with pytest.raises(ProviderError):
        lab.up()


def test_the_provider_is_chosen_by_flag_or_environment(monkeypatch):
    assert select("kind").name == "kind"
    monkeypatch.setenv("KRMCOURSE_PROVIDER", "existing")
    assert select().name == "existing"
    monkeypatch.setenv("KRMCOURSE_PROVIDER", "minikube")
    with pytest.raises(Exception, match="Unknown provider 'minikube'"):
        select()


def _has(cmd: str) -> bool:
    from shutil import which

    return which(cmd) is not None
