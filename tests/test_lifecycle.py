"""Bringing lab clusters up and down: idempotence, isolation, errors, and leaving no trace."""

from __future__ import annotations

import os
import signal
import socket
import ssl
import stat
import subprocess
from pathlib import Path

import httpx
import psutil
import pytest
from terminal import CLI

from krmcourse import Lab, PortInUseError, UnknownExerciseError, UnknownLabError
from krmcourse.paths import state_dir
from krmcourse.providers.base import range_request
from krmcourse.providers.kwok import COMPONENTS, GOGC, GOGC_APISERVER, KwokProvider

pytestmark = [pytest.mark.cluster, pytest.mark.every_provider]



def listening_ports(pids: set[int]) -> set[int]:
    ports = set()
    for conn in psutil.net_connections(kind="inet"):
        if conn.status == psutil.CONN_LISTEN and conn.pid in pids:
            ports.add(conn.laddr.port)
    return ports


def cluster_processes(cluster: str) -> list[psutil.Process]:
    folder = str(state_dir() / "kwok" / "clusters" / cluster)
    found = []
    for proc in psutil.process_iter(["exe", "cmdline"]):
        text = (proc.info["exe"] or "") + " ".join(proc.info["cmdline"] or [])
        if folder in text:
            found.append(proc)
    return found


def test_unknown_lab_is_a_clear_error():
    with pytest.raises(UnknownLabError, match="no lab called 'sandbx'") as err:
        Lab("sandbx")
    assert "sandbox" in err.value.hint
    done = subprocess.run([*CLI, "up", "sandbx"], capture_output=True, text=True)
    assert done.returncode == 2
    assert "Did you mean 'sandbox'" in done.stderr


@pytest.mark.kwok
def test_three_clusters_run_side_by_side_and_down_leaves_nothing():
    labs = [Lab("sandbox", instance=i) for i in ("one", "two", "three")]
    try:
        for lab in labs:
            lab.up()
        servers = {lab.server for lab in labs}
        assert len(servers) == 3, servers
        assert all(s.startswith("https://127.0.0.1:") for s in servers)
        labs[0].kubectl("create", "configmap", "only-in-one")
        assert labs[0].get("configmap", "only-in-one", "default") is not None
        assert labs[1].get("configmap", "only-in-one", "default") is None
        assert labs[2].get("configmap", "only-in-one", "default") is None
        for lab in labs:
            assert oct(lab.kubeconfig.stat().st_mode & 0o777) == "0o600"
            ports = listening_ports(set(lab.component_pids().values()))
            assert ports and all(
                c.laddr.ip == "127.0.0.1" for c in psutil.net_connections(kind="inet")
                if c.status == psutil.CONN_LISTEN and c.laddr.port in ports)
    finally:
        pids = {pid for lab in labs for pid in lab.component_pids().values()}
        ports = listening_ports(pids)
        for lab in labs:
            lab.down()
    assert not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in pids)
    for port in ports:
        with socket.socket() as sock:
            assert sock.connect_ex(("127.0.0.1", port)) != 0, f"port {port} still answers after down"
    for lab in labs:
        assert not (state_dir() / "kwok" / "clusters" / lab.cluster).exists()
        assert not lab.home.exists()
        assert not cluster_processes(lab.cluster)


def test_up_is_idempotent_and_reset_starts_afresh():
    said: list[str] = []
    lab = Lab("sandbox", instance="idem", say=said.append)
    try:
        lab.up()
        server = lab.server
        lab.kubectl("create", "configmap", "keep-me")
        said.clear()
        lab.up()
        assert any("reusing the running cluster" in line for line in said), said
        assert lab.server == server
        assert lab.get("configmap", "keep-me", "default") is not None
        lab.reset()
        assert lab.get("configmap", "keep-me", "default") is None
        assert lab.api.version()["gitVersion"].startswith("v1.36")
    finally:
        lab.down()


@pytest.mark.kwok
def test_the_api_server_collects_garbage_most_eagerly(sandbox):
    """The memory lever benchmarks/memory_levers.py measured and the README reports is what runs."""
    gogc = {name: psutil.Process(pid).environ().get("GOGC") for name, pid in sandbox.component_pids().items()}
    one = os.environ.get("KRMCOURSE_GOGC")  # sets all five
    assert gogc == {name: one or (GOGC_APISERVER if name == "kube-apiserver" else GOGC) for name in COMPONENTS}, gogc


def test_the_first_deletion_of_a_labs_custom_resource_takes_its_dependents_at_once():
    """Without kube-controller-manager started afresh once the lab's CRDs exist, its garbage collector
    learns of their kinds only at its next look (every 30 s), and holds the dependents back meanwhile:
    the 20 s below ran out for every such first deletion (the children went after 20 to 40 s)."""
    lab = Lab("controllers", instance="gc", say=lambda _m: None)
    lab.down()
    lab.up()
    try:
        owner = {"apiVersion": "controllers.krmcourse.dev/v1alpha1", "kind": "Greeting",
                 "metadata": {"name": "owner", "namespace": "default"}, "spec": {"to": "GC"}}
        lab.apply(owner)
        uid = lab.get("greeting", "owner", namespace="default")["metadata"]["uid"]
        lab.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
            "name": "dependent", "namespace": "default",
            "ownerReferences": [{"apiVersion": owner["apiVersion"], "kind": "Greeting", "name": "owner",
                                 "uid": uid}]}})
        lab.delete("greeting", "owner", namespace="default")
        lab.wait_until(lambda: lab.get("configmap", "dependent", namespace="default") is None, timeout=20,
                       message="the garbage collector did not delete the dependent of a Greeting")
    finally:
        lab.down()


@pytest.mark.kwok
def test_etcd_answers_only_a_client_with_the_clusters_certificate(sandbox):
    """On a shared machine (a workshop hub), another user who finds a lab's etcd port must not read the
    cluster's objects there: etcd speaks only TLS and asks for a certificate of the cluster's own CA, and
    only the cluster's owner can read that CA's keys."""
    flags = sandbox.provider.apiserver_flags(sandbox.cluster)
    url = flags["etcd-servers"]
    assert url.startswith("https://127.0.0.1:"), url
    pki = Path(flags["etcd-certfile"]).parent
    assert stat.S_IMODE(pki.stat().st_mode) == 0o700, oct(pki.stat().st_mode)
    body = range_request("/registry/", prefix=True)
    with pytest.raises(httpx.TransportError):  # plain HTTP: etcd hangs up
        httpx.post(url.replace("https://", "http://") + "/v3/kv/range", json=body, timeout=10)
    with pytest.raises(httpx.TransportError, match="CERTIFICATE_REQUIRED"):  # TLS without a certificate
        httpx.post(url + "/v3/kv/range", json=body, timeout=10,
                   verify=ssl.create_default_context(cafile=flags["etcd-cafile"]))
    assert sandbox.provider.etcd_range(sandbox.cluster, "/registry/namespaces/default")  # with it: the data


@pytest.mark.kwok
def test_a_dead_component_is_reported_and_up_recreates_the_cluster():
    lab = Lab("sandbox", instance="broken", say=messages.append if (messages := []) is not None else None)
    try:
        lab.up()
        os.kill(lab.component_pids()["kube-scheduler"], signal.SIGKILL)
        lab.wait_until(lambda: not lab.status()["components"]["kube-scheduler"], timeout=10)
        status = subprocess.run([*CLI, "status", "sandbox", "--instance", "broken"], capture_output=True,
                                text=True)
        assert status.returncode == 5 and "kube-scheduler=DOWN" in status.stdout
        # Without a lab named, status lists every cluster of the state folder, a second instance's too.
        for args in ([], ["--instance", "broken"]):
            every = subprocess.run([*CLI, "status", *args], capture_output=True, text=True)
            line = next((row for row in every.stdout.splitlines() if lab.cluster in row), "")
            assert every.returncode == 5 and "UNHEALTHY" in line and "kube-scheduler=DOWN" in line, every.stdout
        lab.up()
        assert any("kube-scheduler is not running" in m for m in messages), messages
        assert all(lab.status()["components"].values())
    finally:
        lab.down()


@pytest.mark.kwok
def test_a_component_that_stops_while_the_api_starts_is_started_again():
    class StopsTheControllerManager(KwokProvider):
        """Kills kube-controller-manager as soon as kwokctl has started everything, as a busy machine can."""

        stopped: int | None = None

        def create(self, options, say):
            super().create(options, say)
            self.stopped = self.pids(options.cluster)["kube-controller-manager"]
            os.kill(self.stopped, signal.SIGKILL)

    provider = StopsTheControllerManager()
    messages: list[str] = []
    lab = Lab("sandbox", instance="restart", provider=provider, say=messages.append)
    try:
        lab.up()
        assert any("kube-controller-manager stopped while the API server was starting" in m for m in messages)
        assert lab.component_pids()["kube-controller-manager"] != provider.stopped
        assert all(lab.status()["components"].values())
        # The ServiceAccount comes from the second kube-controller-manager: the first never saw a healthy API.
        assert lab.get("serviceaccount", "default", namespace="default") is not None
    finally:
        lab.down()


@pytest.mark.kwok
def test_down_never_kills_a_process_that_reused_a_recorded_pid():
    lab = Lab("sandbox", instance="stranger")
    stranger = subprocess.Popen(["sleep", "120"])
    try:
        lab.up()
        # As if a pid file outlived its process and the pid went to someone else's program.
        (lab.kubeconfig.parent / "pids" / "stranger.pid").write_text(str(stranger.pid))
        lab.down()
        assert stranger.poll() is None, "down killed a process that was not the cluster's"
        assert not cluster_processes(lab.cluster)
    finally:
        stranger.kill()
        stranger.wait()
        lab.down()


def test_a_corrupt_state_folder_is_recreated_with_a_message():
    messages: list[str] = []
    lab = Lab("sandbox", instance="corrupt", say=messages.append)
    try:
        lab.up()
        lab.kubeconfig.unlink()
        lab.up()
        assert any("state folder is incomplete" in m for m in messages), messages
        assert lab.status()["ready"]
    finally:
        lab.down()


@pytest.mark.kwok
def test_a_port_in_use_is_a_clear_error_and_starts_nothing(taken_port: int) -> None:
    lab = Lab("sandbox", instance="port")
    with pytest.raises(PortInUseError, match=f"Port {taken_port}"):
        lab.up(port=taken_port)
    assert not (state_dir() / "kwok" / "clusters" / lab.cluster).exists()
    done = subprocess.run([*CLI, "up", "sandbox", "--instance", "port", "--port", str(taken_port)],
                          capture_output=True, text=True)
    assert done.returncode == 4 and "already in use" in done.stderr


@pytest.mark.kwok
def test_an_interrupted_up_leaves_no_orphan_process():
    # Python turns SIGINT into KeyboardInterrupt only when it did not start with SIGINT ignored, and test
    # runners' workers may ignore it: give the child the default disposition, as a terminal would.
    proc = subprocess.Popen([*CLI, "up", "sandbox", "--instance", "interrupted"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    folder = state_dir() / "kwok" / "clusters" / "krm-sandbox-interrupted"
    # Interrupt as soon as a component runs: some have started, the cluster is not ready yet.
    Lab.wait_until(lambda: cluster_processes("krm-sandbox-interrupted"), timeout=60, interval=0.05,
                   message="no component of the cluster ever started")
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, out
    assert "interrupted" in out
    assert not folder.exists()
    assert not cluster_processes("krm-sandbox-interrupted")


def test_up_never_touches_the_users_kubeconfig(tmp_path):
    from krmcourse.paths import cache_dir

    # A fresh HOME, but the same toolchain cache (which otherwise lives under HOME).
    env = {**os.environ, "HOME": str(tmp_path), "KRMCOURSE_CACHE": str(cache_dir())}
    try:
        done = subprocess.run([*CLI, "up", "sandbox", "--instance", "home"], env=env, capture_output=True,
                              text=True)
        assert done.returncode == 0, done.stderr
        assert "export KUBECONFIG=" in done.stdout
        assert not (tmp_path / ".kube").exists()
    finally:
        subprocess.run([*CLI, "down", "sandbox", "--instance", "home"], env=env, capture_output=True)


def test_unknown_exercise_is_a_clear_error(sandbox):
    with pytest.raises(UnknownExerciseError):
        sandbox.check("no-such-exercise")


def test_managed_processes_stop_on_down(tmp_path):
    script = tmp_path / "sleeper.py"
    script.write_text("import time, os\nprint('started', os.environ['KUBECONFIG'], flush=True)\ntime.sleep(600)\n")
    lab = Lab("sandbox", instance="procs").up()
    proc = lab.run_controller(script)
    assert str(lab.kubeconfig) in proc.wait_for_log("started")
    pid = proc.pid
    lab.down()
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_kubeconfig_path_is_inside_krmcourse_state():
    lab = Lab("sandbox", instance="where")
    assert Path(lab.kubeconfig).is_relative_to(state_dir())
