"""The default provider: a real control plane run as local processes by kwokctl's binary runtime.

etcd, kube-apiserver, kube-controller-manager and kube-scheduler are the real programs, built from
source by :mod:`krmcourse.toolchain`; kwok plays the kubelets, so nodes and pods are simulated while
everything else (RBAC, admission, garbage collection, Deployments, Jobs) is real. kwokctl keeps each
cluster in ``$KWOK_WORKDIR/clusters/<name>``; we point ``KWOK_WORKDIR`` into krmcourse's own state
folder so nothing lands in ``~/.kwok`` or ``~/.kube``.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import yaml

from .. import pins, toolchain
from ..errors import ClusterError, ToolchainError
from ..kubectl import kubectl_binary
from ..paths import file_lock, locks_dir, state_dir
from .base import ETCD_ARGS, ClusterOptions, Provider, Say, check_port_free, flags_of

#: Go's garbage-collector target for the components, and the API server's (which holds most of a
#: cluster's own memory); see config_document.
GOGC = "50"
GOGC_APISERVER = "25"

COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok-controller")

# Metadata for every request, but not the constant chatter of leases and events, and no request bodies:
# enough to answer "who did what to which object", small enough to read in a notebook.
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {"level": "None", "resources": [{"group": "coordination.k8s.io", "resources": ["leases"]}]},
        {"level": "None", "resources": [{"group": "", "resources": ["events"]},
                                        {"group": "events.k8s.io", "resources": ["events"]}]},
        {"level": "None", "nonResourceURLs": ["/healthz*", "/readyz*", "/livez*", "/version"]},
        {"level": "Metadata"},
    ],
}


def etcd_over_tls(pki: Path, port: int, peer_port: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """etcd's and kube-apiserver's extra arguments for an etcd that speaks only TLS, to clients that show
    a certificate of the cluster's own CA: (etcd's, kube-apiserver's).

    kwokctl starts etcd on plain HTTP, where anyone on the machine who finds its port reads and writes
    every object of the cluster, Secrets included: on a shared machine (a workshop hub), another learner.
    kwokctl's certificate authority and its one certificate (valid for 127.0.0.1, as a server and as a
    client) are under the cluster's folder in ``pki``, which only the cluster's owner can read; the
    cluster's etcd serves that certificate and asks its clients for one signed by the same CA.
    """
    ca, cert, key = (str(pki / name) for name in ("ca.crt", "admin.crt", "admin.key"))
    client, peer = f"https://127.0.0.1:{port}", f"https://127.0.0.1:{peer_port}"
    etcd = {"listen-client-urls": client, "advertise-client-urls": client, "listen-peer-urls": peer,
            "initial-advertise-peer-urls": peer, "initial-cluster": f"node0={peer}"}
    secured = {"cert-file": cert, "key-file": key, "trusted-ca-file": ca, "client-cert-auth": "true",
               "peer-cert-file": cert, "peer-key-file": key, "peer-trusted-ca-file": ca,
               "peer-client-cert-auth": "true"}
    apiserver = {"etcd-cafile": ca, "etcd-certfile": cert, "etcd-keyfile": key}
    return ([*({"key": k, "value": v, "override": True} for k, v in etcd.items()),
             *({"key": k, "value": v} for k, v in secured.items())],
            [{"key": "etcd-servers", "value": client, "override": True},
             *({"key": k, "value": v} for k, v in apiserver.items())])


#: The ports of one cluster, in the order :func:`free_ports` fills them.
PORT_KEYS = ("kubeApiserverPort", "etcdPort", "etcdPeerPort", "kubeControllerManagerPort",
             "kubeSchedulerPort", "kwokControllerPort")


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports that nothing listens on now, chosen by the kernel."""
    socks: list[socket.socket] = []
    ports: list[int] = []
    try:
        while len(ports) < count:
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            socks.append(sock)
            ports.append(sock.getsockname()[1])
    finally:
        for sock in socks:
            sock.close()
    return ports


#: The lock file held while a cluster picks its ports, in :func:`krmcourse.paths.locks_dir`.
PORTS_LOCK = "krmcourse-ports.lock"


def _port_lock() -> AbstractContextManager[None]:
    """Held while a cluster picks its ports and its components bind them (machine-wide)."""
    return file_lock(locks_dir() / PORTS_LOCK)


class KwokProvider(Provider):
    name = "kwok"
    capabilities = frozenset({"simulated-nodes", "etcd", "control-plane-flags", "audit-log", "restart-components"})

    @property
    def workdir(self) -> Path:
        return state_dir() / "kwok"

    def cluster_dir(self, cluster: str) -> Path:
        return self.workdir / "clusters" / cluster

    def kubeconfig(self, cluster: str) -> Path:
        return self.cluster_dir(cluster) / "kubeconfig.yaml"

    def audit_log(self, cluster: str) -> Path | None:
        return self.cluster_dir(cluster) / "logs" / "audit.log"

    def usable(self) -> str | None:
        if toolchain.is_installed():
            return None
        try:
            toolchain.require_go()
        except ToolchainError as exc:
            return str(exc)
        return None  # buildable: `up` builds it first

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        kubectl_dir = str(kubectl_binary().parent)
        # kwokctl polls the API with kubectl, which would cache discovery in ~/.kube/cache: keep that, and
        # anything else kwokctl might put in a home folder, inside krmcourse's own state.
        env.update(KWOK_WORKDIR=str(self.workdir), PATH=f"{kubectl_dir}{os.pathsep}{env.get('PATH', '')}",
                   HOME=str(self.workdir), KUBECACHEDIR=str(self.workdir / "kubectl-cache"),
                   KUBECONFIG=str(self.workdir / ".kube" / "config"))
        return env

    def _kwokctl(self, cluster: str, *args: str, config: Path | None = None,
                 timeout: float = 180) -> subprocess.CompletedProcess[str]:
        cmd = [str(toolchain.binary("kwokctl")), "--name", cluster]
        if config is not None:
            cmd += ["--config", str(config)]
        # start_new_session keeps Ctrl-C in the terminal from killing kwokctl half-way; the caller
        # handles the interrupt and cleans up instead.
        return subprocess.run(cmd + list(args), env=self._env(), capture_output=True, text=True,
                               timeout=timeout, start_new_session=True)

    def config_document(self, options: ClusterOptions) -> list[dict[str, Any]]:
        """The KwokctlConfiguration (plus any Stage documents) for one lab cluster."""
        bins = {c: str(toolchain.binary(c)) for c in (*pins.KUBERNETES_COMMANDS, "etcd", "kwok")}
        opts: dict[str, object] = {
            "runtime": "binary",
            "bindAddress": "127.0.0.1",
            "kubeVersion": pins.KUBERNETES,
            "etcdVersion": pins.ETCD,
            "kwokVersion": pins.KWOK,
            "kubeApiserverBinary": bins["kube-apiserver"],
            "kubeControllerManagerBinary": bins["kube-controller-manager"],
            "kubeSchedulerBinary": bins["kube-scheduler"],
            "kwokControllerBinary": bins["kwok"],
            "etcdBinary": bins["etcd"],
            "kubectlBinary": str(kubectl_binary()),
            "kubeAuthorization": True,
            "kubeAdmission": True,
            "securePort": True,
        }
        if options.audit:
            opts["kubeAuditPolicy"] = str(self.cluster_dir(options.cluster).parent / f".{options.cluster}"
                                          "-audit-policy.yaml")
        free = iter(options.ports)
        ports = {key: options.port if key == "kubeApiserverPort" and options.port else next(free, None)
                 for key in PORT_KEYS}
        opts.update({key: port for key, port in ports.items() if port})
        # etcd as every provider sets it (ETCD_ARGS). The Go components collect garbage more eagerly than
        # Go's default (GOGC=100), the API server most: that keeps a lab cluster's memory down
        # (benchmarks/memory_levers.py). KRMCOURSE_GOGC sets one value for all five.
        gc = [{"name": "GOGC", "value": os.environ.get("KRMCOURSE_GOGC", GOGC)}]
        etcd_port, peer_port = ports["etcdPort"], ports["etcdPeerPort"]
        assert etcd_port and peer_port, "create() picks every port before it writes the configuration"
        etcd_tls, apiserver_tls = etcd_over_tls(self.cluster_dir(options.cluster) / "pki", etcd_port, peer_port)
        patches: list[dict[str, Any]] = [{"name": "etcd", "extraEnvs": gc,
                                          "extraArgs": [*etcd_tls, *({"key": k, "value": v}
                                                                     for k, v in ETCD_ARGS.items())]}]
        apiserver: dict[str, Any] = {"name": "kube-apiserver",
                                     "extraEnvs": [{"name": "GOGC",
                                                    "value": os.environ.get("KRMCOURSE_GOGC", GOGC_APISERVER)}],
                                     "extraArgs": [*apiserver_tls, *({"key": k, "value": v}
                                                                     for k, v in options.apiserver_args.items())]}
        patches.append(apiserver)
        # One kube-controller-manager and one kube-scheduler per cluster: with nobody to elect, leader
        # election only costs time. Asked before the API serves, the first try for the lease fails and
        # the next comes 2 s later, which held every controller back; it also renews a Lease every 2 s.
        single = [{"key": "leader-elect", "value": "false"}]
        patches += [{"name": c, "extraEnvs": gc, **({"extraArgs": single} if c.startswith("kube-") else {})}
                    for c in COMPONENTS if c not in ("etcd", "kube-apiserver")]
        docs: list[dict[str, Any]] = [{"apiVersion": "config.kwok.x-k8s.io/v1alpha1", "kind": "KwokctlConfiguration",
                             "options": opts, "componentsPatches": patches}]
        for stage_file in options.stages:
            docs += [d for d in yaml.safe_load_all(Path(stage_file).read_text()) if d]
        return docs

    def create(self, options: ClusterOptions, say: Say) -> None:
        if not toolchain.is_installed():
            say(f"The lab toolchain is not built yet ({', '.join(toolchain.missing())}); building it now.")
            toolchain.install(say)
        if options.port:
            check_port_free(options.port)
        clusters = self.workdir / "clusters"
        clusters.mkdir(parents=True, exist_ok=True)
        config = clusters / f".{options.cluster}-kwokctl.yaml"
        if options.audit:
            policy = clusters / f".{options.cluster}-audit-policy.yaml"
            policy.write_text(yaml.safe_dump(AUDIT_POLICY))
        try:
            # kwokctl picks ports by counting down from 32767 and probing, so clusters created at the
            # same moment (by several notebooks, or tests) can pick the same ones. We pick random free
            # ports instead, and hold a machine-wide lock until the components have bound them.
            with _port_lock():
                options.ports = free_ports(len(PORT_KEYS))
                config.write_text(yaml.safe_dump_all(self.config_document(options)))
                done = self._kwokctl(options.cluster, "create", "cluster", "--runtime", "binary",
                                     "--kubeconfig", "", "--timeout", "120s", "--wait", "0s", config=config)
        except subprocess.TimeoutExpired as exc:
            raise ClusterError(f"kwokctl did not finish creating {options.cluster} within "
                               f"{exc.timeout:.0f} s.", "Run 'krmcourse doctor' and see the component "
                               f"logs in {self.cluster_dir(options.cluster) / 'logs'}.") from exc
        if done.returncode != 0:
            raise ClusterError(f"kwokctl could not create cluster {options.cluster}:\n"
                               f"{_tail(done.stderr or done.stdout)}",
                               f"See the component logs in {self.cluster_dir(options.cluster) / 'logs'}, "
                               "or run 'krmcourse doctor'.")
        os.chmod(self.kubeconfig(options.cluster), 0o600)
        os.chmod(self.cluster_dir(options.cluster) / "pki", 0o700)  # kwokctl writes its keys readable by all

    def delete(self, cluster: str) -> None:
        # Pids are reused, and a stale folder can outlive its processes: only a process that runs from
        # this cluster's folder is ours. Look before kwokctl kills them (a dead one shows no command).
        ours = [pid for pid in self.pids(cluster).values() if _runs_from(pid, self.cluster_dir(cluster))]
        if self.cluster_dir(cluster).exists():
            try:
                # kwokctl refuses an empty --kubeconfig here; the one it tidies is inside our state (_env).
                self._kwokctl(cluster, "delete", "cluster", timeout=60)
            except subprocess.TimeoutExpired:
                pass
        # kwokctl sends SIGKILL and does not wait; a half-created cluster may have no record of some of
        # it. Wait for (or kill) whatever is left of our processes, then remove the folder.
        for pid in ours:
            stop_process(pid)
        shutil.rmtree(self.cluster_dir(cluster), ignore_errors=True)
        for extra in self.workdir.glob(f"clusters/.{cluster}-*"):
            extra.unlink(missing_ok=True)

    def exists(self, cluster: str) -> bool:
        return self.cluster_dir(cluster).is_dir()

    def clusters(self) -> list[str]:
        root = self.workdir / "clusters"
        return sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []

    def pids(self, cluster: str) -> dict[str, int]:
        found: dict[str, int] = {}
        for pidfile in (self.cluster_dir(cluster) / "pids").glob("*.pid"):
            try:
                found[pidfile.stem] = int(pidfile.read_text().strip())
            except ValueError:
                continue
        return found

    def health(self, cluster: str) -> dict[str, bool]:
        pids = self.pids(cluster)
        return {c: c in pids and _alive(pids[c]) for c in COMPONENTS}

    def apiserver_flags(self, cluster: str) -> dict[str, str]:
        pid = self.pids(cluster).get("kube-apiserver")
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                return flags_of([a.decode() for a in fh.read().split(b"\0") if a])
        except (OSError, TypeError):
            return {}

    def etcd_call(self, cluster: str, call: str, body: dict[str, Any]) -> dict[str, Any]:
        """Ask etcd itself, on 127.0.0.1, through its HTTP gateway: no API server in between. etcd wants
        the cluster's client certificate, as the API server does (:func:`etcd_over_tls`)."""
        import ssl

        import httpx

        flags = self.apiserver_flags(cluster)
        url = flags["etcd-servers"].split(",")[0].rstrip("/")
        tls = ssl.create_default_context(cafile=flags["etcd-cafile"])
        tls.load_cert_chain(flags["etcd-certfile"], flags["etcd-keyfile"])
        response = httpx.post(f"{url}/v3/{call}", json=body, timeout=30, verify=tls)
        response.raise_for_status()
        answer: dict[str, Any] = response.json()
        return answer

    def restart_component(self, cluster: str, component: str, meanwhile: Callable[[], None] | None = None) -> None:
        pid = self.pids(cluster).get(component)
        if pid is None or not _alive(pid):
            raise ClusterError(f"{component} of {cluster} is not running.", "'krmcourse reset' the lab.")
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        try:
            if meanwhile is not None:
                meanwhile()
        finally:
            self.restart_stopped(cluster)

    def restart_stopped(self, cluster: str) -> list[str]:
        """Have kwokctl start the components that stopped, the way ``kwokctl start cluster`` does.

        kwokctl skips a component whose pid file names a live process, and to it a zombie is alive: a
        stopped component's pid file goes first, so that kwokctl starts it afresh.
        """
        stopped = [c for c, ok in self.health(cluster).items() if not ok]
        for component in stopped:
            (self.cluster_dir(cluster) / "pids" / f"{component}.pid").unlink(missing_ok=True)
        if stopped:
            done = self._kwokctl(cluster, "start", "cluster", timeout=60)
            if done.returncode != 0:
                raise ClusterError(f"kwokctl could not start {', '.join(stopped)} again:\n"
                                   f"{_tail(done.stderr or done.stdout)}",
                                   f"See the component logs in {self.cluster_dir(cluster) / 'logs'}.")
        return stopped


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie is dead for our purposes, but only once all of its threads are: a killed Go program's main
    # thread can be a zombie while other threads still hold its sockets open for a moment.
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/stat") as fh:
                if fh.read().split(") ", 1)[1][:1] not in "ZX":
                    return True
        except OSError:
            continue  # that thread has gone since the listing
    return False


def _runs_from(pid: int, folder: Path) -> bool:
    """Whether process ``pid`` was started from ``folder``: kwokctl runs ``<folder>/bin/<component>``."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return str(folder).encode() in fh.read()
    except OSError:
        return False


def stop_process(pid: int, signals: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGKILL)) -> None:
    """Send each signal in turn, until the process (every thread of it) has gone."""
    for sig in signals:
        if not _alive(pid):
            return
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):  # gone, or never ours
            return
        for _ in range(30):
            if not _alive(pid):
                return
            time.sleep(0.1)


def _tail(text: str, lines: int = 20) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])
