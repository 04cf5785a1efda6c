"""The kind provider, for real: what it asks kind for, how it refuses bad set-ups, and lab clusters
on a real kind (a node container running kubeadm's control plane) when the run uses kind.

The first tests need no container engine. Those marked ``kind`` run when KRMCOURSE_PROVIDER=kind
(``.ci/run`` does that after starting a Docker engine), and start real kind clusters.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import psutil
import pytest
import yaml

from krmcourse import Lab, PortInUseError, ProviderError, doctor, nodeimage
from krmcourse.providers import ClusterOptions, select
from krmcourse.providers.kind import KindProvider


def _config(monkeypatch: pytest.MonkeyPatch, **options: object) -> dict:
    monkeypatch.delenv("KRMCOURSE_KIND_IMAGE", raising=False)
    return KindProvider().config_document(ClusterOptions(cluster="krm-sandbox", **options))  # type: ignore[arg-type]


def test_the_cluster_listens_on_loopback_with_the_local_node_image(monkeypatch):
    config = _config(monkeypatch, port=38123)
    assert config["networking"]["apiServerAddress"] == "127.0.0.1"
    assert config["networking"]["apiServerPort"] == 38123
    [node] = config["nodes"]
    assert node["image"] == nodeimage.node_tag()
    patches = [yaml.safe_load(p) for p in node["kubeadmConfigPatches"]]
    kubelet = next(p for p in patches if p["kind"] == "KubeletConfiguration")
    assert kubelet["failCgroupV1"] is False


def test_audit_log_and_lab_flags_reach_the_api_server(monkeypatch):
    config = _config(monkeypatch, apiserver_args={"max-requests-inflight": "50"})
    [node] = config["nodes"]
    cluster = next(yaml.safe_load(p) for p in node["kubeadmConfigPatches"] if "ClusterConfiguration" in p)
    args = {a["name"]: a["value"] for a in cluster["apiServer"]["extraArgs"]}
    assert args["max-requests-inflight"] == "50"
    assert args["audit-log-path"].startswith("/var/log/kubernetes/")
    mounted = {m["containerPath"] for m in node["extraMounts"]}
    assert "/etc/cni/net.d/10-krmcourse.conflist" in mounted
    assert any(p.startswith("/var/log/kubernetes/") for p in mounted)


def test_published_image_leaves_the_choice_to_kind(monkeypatch):
    monkeypatch.setenv("KRMCOURSE_KIND_IMAGE", "published")
    [node] = KindProvider().config_document(ClusterOptions(cluster="krm-sandbox"))["nodes"]
    assert "image" not in node
    assert nodeimage.ready()


def test_kind_names_carry_the_state_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("KRMCOURSE_HOME", str(tmp_path / "a"))
    first = KindProvider().kind_name("krm-sandbox")
    monkeypatch.setenv("KRMCOURSE_HOME", str(tmp_path / "b"))
    assert KindProvider().kind_name("krm-sandbox") != first
    assert first.startswith("krm-sandbox-")


def test_without_docker_installed_the_provider_says_so(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    problem = KindProvider(kind="/bin/true").usable()
    assert problem == "docker is not installed."
    with pytest.raises(ProviderError, match="kind provider cannot run here") as err:
        Lab("sandbox", provider=KindProvider(kind="/bin/true")).up()
    assert "KRMCOURSE_PROVIDER=kwok" in err.value.hint


def test_a_stopped_engine_is_named_with_what_to_do(monkeypatch, tmp_path):
    # A Docker client whose engine does not answer: the real client, pointed at a socket nobody serves.
    if not _has("docker"):
        pytest.skip("the docker client is not installed here, so a stopped engine cannot be shown")
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'nobody.sock'}")
    provider = KindProvider(kind="/bin/true")
    assert "engine is not running" in (provider.usable() or "")
    with pytest.raises(ProviderError) as err:
        provider.create(ClusterOptions(cluster="krm-sandbox"), say=lambda _m: None)
    assert "start it" in err.value.hint and "krmcourse doctor" in err.value.hint
    assert not provider.folder("krm-sandbox").exists()


def test_the_provider_is_chosen_by_flag_or_environment(monkeypatch):
    assert select("kind").name == "kind"
    monkeypatch.setenv("KRMCOURSE_PROVIDER", "existing")
    assert select().name == "existing"
    monkeypatch.setenv("KRMCOURSE_PROVIDER", "minikube")
    with pytest.raises(Exception, match="Unknown provider 'minikube'"):
        select()


# ------------------------------------------------------------------------------ on a real kind
def _containers(name: str) -> list[str]:
    done = subprocess.run(["docker", "ps", "-a", "--filter", f"name={name}", "--format", "{{.Names}}"],
                          capture_output=True, text=True, check=True)
    return done.stdout.split()


@pytest.mark.kind
def test_a_missing_node_image_says_how_to_make_it(monkeypatch):
    monkeypatch.setenv("KRMCOURSE_KIND_IMAGE", "krmcourse/no-such-node:0")
    problem = KindProvider().usable() or ""
    assert "krmcourse/no-such-node:0" in problem and "toolchain install --provider kind" in problem
    with pytest.raises(ProviderError):
        Lab("sandbox", instance="noimage", provider="kind").up()
    assert not _containers("krm-sandbox-noimage")


@pytest.mark.kind
def test_a_taken_port_fails_before_anything_is_created(taken_port: int) -> None:
    lab = Lab("sandbox", instance="porttaken", provider="kind", say=lambda _m: None)
    with pytest.raises(PortInUseError, match=str(taken_port)):
        lab.up(port=taken_port)
    assert not _containers("krm-sandbox-porttaken")
    assert not KindProvider().folder(lab.cluster).exists()


@pytest.mark.kind
def test_an_interrupted_up_leaves_no_container_folder_or_process():
    import signal
    import sys
    import time

    cluster = "krm-sandbox-interrupted"
    node = KindProvider().node(cluster)
    proc = subprocess.Popen([sys.executable, "-m", "krmcourse.cli", "up", "sandbox", "--instance", "interrupted",
                             "--provider", "kind"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    while not _containers(node) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _containers(node), "kind never created the node container"
    proc.send_signal(signal.SIGINT)  # mid-way: the node exists, kubeadm has not finished
    out, _ = proc.communicate(timeout=180)
    assert proc.returncode == 130, out
    assert "interrupted" in out
    assert not _containers(node)
    assert not KindProvider().folder(cluster).exists()
    assert not [p for p in psutil.process_iter(["cmdline"]) if cluster in " ".join(p.info["cmdline"] or [])]


@pytest.mark.kind
@pytest.mark.cluster
def test_a_lab_on_kind_has_simulated_nodes_a_real_control_plane_and_leaves_nothing():
    lab = Lab("composite", instance="kindcheck", provider="kind", say=lambda _m: None).up()
    provider = lab.provider
    node = provider.node(lab.cluster)
    try:
        assert oct(lab.kubeconfig.stat().st_mode & 0o777) == "0o600"
        assert lab.server.startswith("https://127.0.0.1:")
        # The lab's nodes are kwok's, found by label; the real node keeps its control-plane taint.
        assert lab.nodes() == ["kwok-node-0", "kwok-node-1"]
        real = lab.get("node", node)
        assert real and any(t["key"] == "node-role.kubernetes.io/control-plane" for t in real["spec"]["taints"])
        # The control plane runs in the node, as pods of kube-system that the real kubelet started.
        system = lab.objects("pods", "kube-system")
        running = {p["metadata"].get("labels", {}).get("component") for p in system
                   if p["status"].get("phase") == "Running"}
        assert {"kube-apiserver", "etcd", "kube-scheduler"} <= running
        # Reading etcd and the API server's flags works through the node.
        flags = provider.apiserver_flags(lab.cluster)
        assert flags["etcd-servers"].startswith("https://127.0.0.1:2379")
        kvs = provider.etcd_range(lab.cluster, "/registry/namespaces/default")
        assert len(kvs) == 1
        # The audit log lands in the cluster's state folder, readable here.
        log = lab.audit_log
        assert log is not None
        lab.wait_until(lambda: log.is_file() and log.stat().st_size > 0, timeout=30)
        # A server the API server must call listens on the container network's gateway, never 0.0.0.0.
        assert lab.host_address not in ("0.0.0.0", "127.0.0.1")
        pids = lab.component_pids()
        assert {"kwok-controller", "kube-apiserver"} <= pids.keys()
    finally:
        lab.down()
    assert not _containers(node)
    assert not provider.folder(lab.cluster).exists()
    assert not [p for p in pids.values() if _alive(p)]
    kubeconfigs = Path.home() / ".kube" / "config"
    assert not kubeconfigs.exists() or provider.kind_name(lab.cluster) not in kubeconfigs.read_text()


@pytest.mark.kind
@pytest.mark.cluster
@pytest.mark.parametrize("remade_by_the_engine", [False, True], ids=["gone", "remade-empty"])
def test_doctor_fix_removes_a_kind_cluster_whose_state_folder_is_gone(remade_by_the_engine: bool):
    lab = Lab("sandbox", instance="orphan", provider="kind", say=lambda _m: None).up()
    provider = lab.provider
    name, kwok = provider.kind_name(lab.cluster), lab.component_pids()["kwok-controller"]
    # A crashed kernel with a deleted state folder: the node container and kwok are left behind.
    subprocess.run(["rm", "-rf", str(provider.folder(lab.cluster)), str(lab.home)], check=True)
    if remade_by_the_engine:  # a restarted engine starts the node again, making each missing mount a directory
        (provider.folder(lab.cluster) / "cni.conflist").mkdir(parents=True)
    findings = [f for f in doctor.examine() if not f.ok]
    assert any(name in f.what and "doctor --fix" in f.fix for f in findings), findings
    assert any(f.what.startswith(f"leaked process {kwok}") for f in findings), findings
    doctor.fix()
    assert not _containers(f"{name}-control-plane")
    assert not _alive(kwok)
    assert not [f for f in doctor.examine() if not f.ok and name in f.what]


@pytest.mark.kind
@pytest.mark.cluster
def test_down_all_takes_down_every_kind_cluster_of_this_state_folder(tmp_path, monkeypatch):
    import sys

    # A state folder of its own: 'down --all' must not take down this test run's other clusters.
    home = tmp_path / "home"
    env = {**os.environ, "KRMCOURSE_HOME": str(home)}
    cli = [sys.executable, "-m", "krmcourse.cli"]
    for name in ("first", "second"):
        done = subprocess.run([*cli, "up", "sandbox", "--instance", name, "--provider", "kind"], env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
    monkeypatch.setenv("KRMCOURSE_HOME", str(home))
    nodes = [KindProvider().node(f"krm-sandbox-{name}") for name in ("first", "second")]
    assert all(_containers(n) for n in nodes)
    done = subprocess.run([*cli, "down", "--all"], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not any(_containers(n) for n in nodes)
    assert KindProvider().clusters() == []


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/stat")
    return not status.exists() or status.read_text().split(") ", 1)[1][:1] not in "ZX"


def _has(cmd: str) -> bool:
    from shutil import which

    return which(cmd) is not None
