"""The kind provider: one real kind cluster (a node container with kubeadm's control plane) per lab.

The node image is the one :mod:`krmcourse.nodeimage` makes here from source, or kind's published one
(``KRMCOURSE_KIND_IMAGE=published``). Either way every cluster gets the same set-up:

- the API server on 127.0.0.1 only, on a port kind picks (or ``--port``);
- a plain CNI configuration (ptp and host-local, from the node's CNI plugins), mounted into the node,
  instead of kind's default network daemon; kube-proxy and CoreDNS run as kubeadm installs them;
- kubelet allowed to run on a cgroup v1 host (Kubernetes 1.35 and later refuse that by default);
- an audit log, written into the cluster's state folder on this machine;
- the node keeps its control-plane taint, so a lab's pods go to its simulated nodes only, and
  **kwok runs on this machine** with the cluster's kubeconfig, looking after those simulated nodes.

Why kwok runs here rather than inside the cluster: it is the very binary and the same Stage files as
on the default provider, it needs no image loaded into the node, and it works before the cluster's
pod network does.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import yaml

from .. import nodeimage, toolchain
from ..credentials import as_files
from ..errors import ClusterError, ProviderError
from ..paths import private_file, state_dir
from ..processes import spawn_detached
from .base import ETCD_ARGS, ClusterOptions, Provider, Say, check_port_free, flags_of
from .kwok import AUDIT_POLICY, _alive, _port_lock, _runs_from, free_ports, stop_process

NO_ENGINE_HINT = ("Install Docker and start it (on Linux: 'sudo systemctl start docker'; Docker Desktop: open it), "
                  "then try again; 'krmcourse doctor' checks it. Or use the default provider, which needs no "
                  "container engine: KRMCOURSE_PROVIDER=kwok.")
#: Where the API server in the node writes its audit log and reads its policy, both mounted from here.
AUDIT_DIR = "/var/log/kubernetes/krmcourse"
POLICY_DIR = "/etc/kubernetes/krmcourse"
#: The simulated nodes' pod addresses come from kwok; the real node's from this range (kind's default).
POD_SUBNET = "10.244.0.0/16"
NODE_POD_RANGE = "10.244.0.0/24"
#: Programs in the node container whose pids :meth:`KindProvider.pids` reports.
NODE_PROGRAMS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "containerd")
#: What a restarted control-plane static pod's name gains, or loses when it has it (restart_component).
AGAIN = "-again"
#: Keeps a kube-system workload off the simulated nodes (which carry type=kwok).
REAL_NODES_ONLY = json.dumps({"spec": {"template": {"spec": {"affinity": {"nodeAffinity": {
    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "type", "operator": "NotIn", "values": ["kwok"]}]}]}}}}}}})
#: Node annotation that hands a Node to kwok, on every provider.
KWOK_ANNOTATION = "kwok.x-k8s.io/node=fake"


def _node_of(kind_name: str) -> str:
    """The node container's name for a kind cluster name, as kind names it (one node per cluster)."""
    return f"{kind_name}-control-plane"


class KindProvider(Provider):
    name = "kind"
    capabilities = frozenset({"simulated-nodes", "etcd", "control-plane-flags", "audit-log", "restart-components"})

    def __init__(self, kind: str | None = None) -> None:
        self._kind = kind

    # ------------------------------------------------------------------------- where things are
    @property
    def kind(self) -> str | None:
        if self._kind:
            return self._kind
        built = toolchain.KIND.binary("kind")
        return str(built) if toolchain.KIND.built else shutil.which("kind")

    @property
    def engine(self) -> str:
        return os.environ.get("KIND_EXPERIMENTAL_PROVIDER", "docker")

    def folder(self, cluster: str) -> Path:
        return state_dir() / "kind" / cluster

    def kubeconfig(self, cluster: str) -> Path:
        return self.folder(cluster) / "kubeconfig.yaml"

    def kind_name(self, cluster: str) -> str:
        """kind's name for a lab cluster. Container names are machine-wide, while lab clusters are per
        state folder (each learner, each test worker has one), so the name carries the folder's digest."""
        return f"{cluster}-{hashlib.sha256(str(state_dir()).encode()).hexdigest()[:6]}"

    def node(self, cluster: str) -> str:
        """The node container's name, as kind names it."""
        return _node_of(self.kind_name(cluster))

    def audit_log(self, cluster: str) -> Path | None:
        log = self.folder(cluster) / "audit" / "audit.log"
        # The API server writes it as root inside the node; let the learner read it (and delete it).
        self._exec(cluster, "sh", "-c", f"chown -R {os.getuid()}:{os.getgid()} {AUDIT_DIR} 2>/dev/null || true",
                   check=False)
        return log

    # ------------------------------------------------------------------------- can it serve here?
    def engine_problem(self) -> str | None:
        """Why no container engine answers, or None when one does."""
        engine = self.engine
        if not shutil.which(engine):
            return f"{engine} is not installed."
        try:
            done = subprocess.run([engine, "info"], capture_output=True, text=True, timeout=20)
        except subprocess.TimeoutExpired:
            return f"'{engine} info' did not answer within 20 s."
        if done.returncode != 0:
            return f"{engine} is installed but its engine is not running ('{engine} info' failed)."
        return None

    def usable(self) -> str | None:
        if not self.kind:
            return ("kind is not installed: run 'krmcourse toolchain install --provider kind' (it builds kind, "
                    "kwok and the node image from source), or install kind and set KRMCOURSE_KIND_IMAGE=published.")
        problem = self.engine_problem()
        if problem:
            return problem
        if not toolchain.KWOK.built:
            return ("kwok, which plays the simulated nodes, is not built: run "
                    "'krmcourse toolchain install --provider kind'.")
        if not nodeimage.ready():
            return (f"the node image {nodeimage.chosen_image()} is not there: run 'krmcourse toolchain install "
                    "--provider kind' to make it, or set KRMCOURSE_KIND_IMAGE=published to let kind pull its own.")
        return None

    # ------------------------------------------------------------------------- commands
    def _run(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        if not self.kind:
            raise ProviderError("kind is not installed.", "Run 'krmcourse toolchain install --provider kind'.")
        env = {**os.environ, "KUBECONFIG": str(state_dir() / "kind" / ".kube-config-unused")}
        # Its own session, so that Ctrl-C in a terminal reaches krmcourse alone, which then stops kind
        # and every docker client kind started, as one process group.
        proc = subprocess.Popen([self.kind, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env, start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout)
        except BaseException:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.communicate()
            raise
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    def _inspect(self, container: str, template: str) -> str | None:
        """``docker inspect -f TEMPLATE`` of one container; None when it, or the engine, is not there."""
        try:
            done = subprocess.run([self.engine, "inspect", "-f", template, container], capture_output=True,
                                  text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    def _exec(self, cluster: str, *args: str, check: bool = True,
              input: str | None = None) -> subprocess.CompletedProcess[str]:
        """Run a command inside the cluster's node container."""
        done = subprocess.run([self.engine, "exec", *(["-i"] if input is not None else []), self.node(cluster),
                               *args], capture_output=True, text=True, timeout=60, input=input)
        if check and done.returncode != 0:
            raise ClusterError(f"'{' '.join(args[:3])}' in the node of {cluster} failed: {done.stderr.strip()}",
                               f"'krmcourse reset' the lab if its node container is broken ({self.node(cluster)}).")
        return done

    # ------------------------------------------------------------------------- the cluster
    def config_document(self, options: ClusterOptions) -> dict[str, Any]:
        """The kind Cluster configuration for one lab cluster."""
        folder = self.folder(options.cluster)
        networking: dict[str, object] = {"apiServerAddress": "127.0.0.1", "disableDefaultCNI": True,
                                         "podSubnet": POD_SUBNET}
        if options.port:
            networking["apiServerPort"] = options.port
        mounts = [{"hostPath": str(folder / "cni.conflist"), "containerPath": "/etc/cni/net.d/10-krmcourse.conflist",
                   "readOnly": True}]
        apiserver_args = dict(options.apiserver_args)
        volumes = []
        if options.audit:
            mounts += [{"hostPath": str(folder / "audit"), "containerPath": AUDIT_DIR},
                       {"hostPath": str(folder / "policy"), "containerPath": POLICY_DIR, "readOnly": True}]
            apiserver_args.update({"audit-policy-file": f"{POLICY_DIR}/audit-policy.yaml",
                                   "audit-log-path": f"{AUDIT_DIR}/audit.log"})
            volumes = [{"name": "krmcourse-audit", "hostPath": AUDIT_DIR, "mountPath": AUDIT_DIR,
                        "pathType": "DirectoryOrCreate"},
                       {"name": "krmcourse-policy", "hostPath": POLICY_DIR, "mountPath": POLICY_DIR,
                        "readOnly": True, "pathType": "DirectoryOrCreate"}]
        cluster_config: dict[str, object] = {
            "apiVersion": "kubeadm.k8s.io/v1beta4", "kind": "ClusterConfiguration",
            "apiServer": {"extraArgs": [{"name": k, "value": v} for k, v in apiserver_args.items()],
                          "extraVolumes": volumes},
            # A lab's data is disposable, as on the default provider.
            "etcd": {"local": {"extraArgs": [{"name": k, "value": v} for k, v in ETCD_ARGS.items()]}},
        }
        kubelet = {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
                   # Kubernetes 1.35+ refuses cgroup v1 unless told; some learners' machines still have it.
                   "failCgroupV1": False}
        node: dict[str, object] = {"role": "control-plane", "extraMounts": mounts,
                                   "kubeadmConfigPatches": [yaml.safe_dump(cluster_config), yaml.safe_dump(kubelet)]}
        image = nodeimage.chosen_image()
        if image:
            node["image"] = image
        config: dict[str, object] = {"kind": "Cluster", "apiVersion": "kind.x-k8s.io/v1alpha4",
                                     "networking": networking, "nodes": [node]}
        if not _may_lower_oom_scores():
            # Without CAP_SYS_RESOURCE (some VMs withhold it) nothing in the node may lower an
            # oom_score_adj, and runc fails to start any pod that asks; containerd can clamp the
            # values instead, as kind's entrypoint has it do for rootless nodes.
            config["containerdConfigPatches"] = [
                '[plugins."io.containerd.grpc.v1.cri"]\n  restrict_oom_score_adj = true\n']
        return config

    def create(self, options: ClusterOptions, say: Say) -> None:
        problem = self.usable()
        if problem:
            raise ProviderError(f"The kind provider cannot run here: {problem}", NO_ENGINE_HINT)
        if options.port:
            check_port_free(options.port)
        folder = self.folder(options.cluster)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "cni.conflist").write_text(json.dumps(cni_config(), indent=1))
        if options.audit:
            (folder / "audit").mkdir(exist_ok=True)
            (folder / "policy").mkdir(exist_ok=True)
            (folder / "policy" / "audit-policy.yaml").write_text(yaml.safe_dump(AUDIT_POLICY))
        config = folder / "kind.yaml"
        config.write_text(yaml.safe_dump(self.config_document(options)))
        kubeconfig = self.kubeconfig(options.cluster)
        # kind writes the kubeconfig itself; create it private first so it never exists world-readable.
        private_file(kubeconfig, "")
        say(f"kind is creating {options.cluster} (a node container running kubeadm; under a minute)")
        try:
            done = self._run("create", "cluster", "--name", self.kind_name(options.cluster), "--config", str(config),
                             "--kubeconfig", str(kubeconfig), "--wait", "180s", "--retain")
        except BaseException as exc:
            # Interrupted (or out of time) half-way: a docker request kind sent may still create the node
            # after kind has gone, so remove whatever carries the cluster's label until nothing comes.
            self._remove_nodes(options.cluster)
            if isinstance(exc, subprocess.TimeoutExpired):
                raise ClusterError(f"kind did not finish creating {options.cluster} within {exc.timeout:.0f} s.",
                                   "See 'krmcourse doctor'; 'krmcourse reset' tries again from scratch.") from exc
            raise
        if done.returncode != 0:
            self._keep_node_logs(options.cluster)
            raise ClusterError(f"kind could not create {options.cluster}:\n{done.stderr.strip()[-2000:]}",
                               f"The node's logs are kept in {folder / 'logs'}; 'krmcourse reset' tries again, "
                               "and 'krmcourse doctor' checks Docker." + inotify_advice())
        os.chmod(kubeconfig, 0o600)
        as_files(kubeconfig, folder / "pki")  # kind writes them inline; every client would copy them to /tmp
        # kind lets pods onto the only node; the labs' pods belong on their simulated nodes, as on kwok.
        # And the cluster's own add-ons belong on the real node, where they really run.
        admin = ("kubectl", "--kubeconfig=/etc/kubernetes/admin.conf")
        self._exec(options.cluster, *admin, "taint", "node", self.node(options.cluster),
                   "node-role.kubernetes.io/control-plane:NoSchedule", "--overwrite")
        for workload in ("daemonset/kube-proxy", "deployment/coredns"):
            self._exec(options.cluster, *admin, "-n", "kube-system", "patch", workload, "-p", REAL_NODES_ONLY,
                       check=False)  # a published image may come without one of them
        self._start_kwok(options)

    def _remove_nodes(self, cluster: str, quiet_for: float = 2.0, within: float = 30.0) -> None:
        """Remove every container labelled for this cluster, until none has appeared for ``quiet_for`` s."""
        label = f"label=io.x-k8s.kind.cluster={self.kind_name(cluster)}"
        deadline, quiet_since = time.monotonic() + within, time.monotonic()
        while time.monotonic() < deadline and time.monotonic() - quiet_since < quiet_for:
            try:
                found = subprocess.run([self.engine, "ps", "-aq", "--filter", label], capture_output=True,
                                       text=True, timeout=30).stdout.split()
                if found:
                    for container in found:
                        self._thaw(container)
                    subprocess.run([self.engine, "rm", "-f", "-v", *found], capture_output=True, timeout=120)
                    quiet_since = time.monotonic()
            except (OSError, subprocess.TimeoutExpired):
                return
            time.sleep(0.25)

    def _keep_node_logs(self, cluster: str) -> None:
        """The node's journal of a failed start, for the error to point at."""
        if self.kind:
            self._run("export", "logs", str(self.folder(cluster) / "logs"), "--name", self.kind_name(cluster),
                      timeout=120)

    def _start_kwok(self, options: ClusterOptions) -> None:
        folder = self.folder(options.cluster)
        # A lab's own Stages replace kwok's defaults, as they do under kwokctl.
        files = options.stages or [toolchain.KWOK.folder / "stages.yaml"]
        stages = [d for f in files for d in yaml.safe_load_all(Path(f).read_text()) if d]
        (folder / "kwok.yaml").write_text(yaml.safe_dump_all(stages))
        # kwokctl runs its components from the cluster's own bin/ folder; so does this, which lets 'down'
        # and 'doctor' tell our kwok from anyone else's by its path.
        (folder / "bin").mkdir(exist_ok=True)
        program = folder / "bin" / "kwok"
        program.unlink(missing_ok=True)
        program.symlink_to(toolchain.KWOK.binary("kwok"))
        self._run_kwok(folder)

    def _run_kwok(self, folder: Path) -> None:
        """Start kwok for the cluster in ``folder``, on a free loopback port, and record its pid."""
        (folder / "logs").mkdir(exist_ok=True)
        (folder / "pids").mkdir(exist_ok=True)
        with _port_lock():
            port = free_ports(1)[0]
            argv = [str(folder / "bin" / "kwok"), f"--kubeconfig={folder / 'kubeconfig.yaml'}",
                    f"--config={folder / 'kwok.yaml'}", "--manage-all-nodes=false",
                    f"--manage-nodes-with-annotation-selector={KWOK_ANNOTATION}", f"--server-address=127.0.0.1:{port}",
                    f"--node-port={port}", "--node-ip=127.0.0.1", "--node-lease-duration-seconds=40"]
            pid = spawn_detached(argv, folder / "logs" / "kwok-controller.log", {**os.environ, "GOGC": "50"})
        (folder / "pids" / "kwok-controller.pid").write_text(str(pid))

    def delete(self, cluster: str) -> None:
        folder = self.folder(cluster)
        for pid in self.pids(cluster).values():
            if _runs_from(pid, folder):
                stop_process(pid)
        if self._node_exists(cluster):
            # Files the API server wrote as root into the mounted audit folder go with the node.
            try:
                self._exec(cluster, "sh", "-c", f"rm -rf {AUDIT_DIR}/*", check=False)
            except subprocess.TimeoutExpired:
                pass  # the node is removed next, with its files
            self._remove_node(self.kind_name(cluster), self.kubeconfig(cluster), what=cluster)
        shutil.rmtree(folder, ignore_errors=True)

    def _thaw(self, container: str) -> None:
        """Thaw any frozen cgroup inside a node, so that its processes can be killed.

        On cgroup v1, runc freezes a container's cgroup while it sets it up; a runc killed in between
        (a node deleted while a pod starts) leaves a process frozen for good, and then the node itself
        cannot be killed. Thawing is harmless otherwise; without the right to write cgroups it is skipped.
        """
        pid = self._inspect(container, "{{.State.Pid}}")
        try:
            with open(f"/proc/{pid}/cgroup") as fh:
                freezer = next(line.split(":", 2)[2].strip() for line in fh if ":freezer:" in line)
        except (OSError, StopIteration, TypeError):
            return  # gone, or cgroup v2 (whose freezer a kill does not wait for)
        for state in Path("/sys/fs/cgroup/freezer", freezer.lstrip("/")).rglob("freezer.state"):
            try:
                if state.read_text().strip() != "THAWED":
                    state.write_text("THAWED")
            except OSError:
                continue

    def _node_exists(self, cluster: str) -> bool:
        return self._container_exists(self.node(cluster))

    def _container_exists(self, container: str) -> bool:
        return self._inspect(container, "{{.State.Running}}") is not None

    def exists(self, cluster: str) -> bool:
        return self.folder(cluster).is_dir() or (self.engine_problem() is None and self._node_exists(cluster))

    def clusters(self) -> list[str]:
        """The lab clusters of this state folder."""
        root = state_dir() / "kind"
        return sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []

    def orphans(self) -> list[str]:
        """kind names of krmcourse clusters whose state folder is gone (a crashed kernel or test run).

        Every node mounts a file from its cluster's state folder, which tells whose it was.
        """
        if not self.kind or self.engine_problem() is not None:
            return []
        found = []
        for name in self._run("get", "clusters", timeout=60).stdout.split():
            if not name.startswith("krm-"):
                continue
            try:
                mounts = json.loads(self._inspect(_node_of(name), "{{json .Mounts}}") or "[]")
            except ValueError:
                continue
            # Gone, or a directory: the engine makes a missing bind-mount source a directory when it
            # starts the node again (at its own restart), which brings back an empty state folder.
            conflists = [Path(m.get("Source", "")) for m in mounts if m.get("Source", "").endswith("/cni.conflist")]
            if conflists and not any(c.is_file() for c in conflists):
                found.append(name)
        return found

    def remove_orphan(self, name: str) -> None:
        """Delete a kind cluster found by :meth:`orphans`, by its kind name."""
        self._remove_node(name, state_dir() / "kind" / ".kube-config-unused", what=f"kind cluster {name}")

    def _remove_node(self, name: str, kubeconfig: Path, what: str) -> None:
        """Delete kind cluster NAME; when kind cannot (or is gone), remove its node container directly."""
        node, said = _node_of(name), ""
        self._thaw(node)
        try:
            if self.kind:
                said = self._run("delete", "cluster", "--name", name, "--kubeconfig", str(kubeconfig),
                                 timeout=180).stderr
        except subprocess.TimeoutExpired as exc:
            said = f"'{' '.join(map(str, exc.cmd[:3]))}' did not finish within {exc.timeout:.0f} s"
        if self._container_exists(node):
            self._thaw(node)
            subprocess.run([self.engine, "rm", "-f", "-v", node], capture_output=True, timeout=120)
        if self._container_exists(node):
            raise ClusterError(f"Could not delete the node container {node} of {what}: {said.strip()[-500:]}",
                               f"Remove it by hand ('{self.engine} rm -f -v {node}'), then run 'krmcourse "
                               "doctor --fix'.")

    def pids(self, cluster: str) -> dict[str, int]:
        """kwok's pid, and those of the node's control-plane programs as this machine numbers them."""
        found = {}
        for pidfile in (self.folder(cluster) / "pids").glob("*.pid"):
            try:
                found[pidfile.stem] = int(pidfile.read_text().strip())
            except ValueError:
                continue
        node_pid = self._inspect(self.node(cluster), "{{.State.Pid}}")
        if node_pid and node_pid != "0":
            try:
                for child in psutil.Process(int(node_pid)).children(recursive=True):
                    if child.name() in NODE_PROGRAMS:
                        found.setdefault(child.name(), child.pid)
            except psutil.Error:
                pass
        return found

    def health(self, cluster: str) -> dict[str, bool]:
        pid = self.pids(cluster).get("kwok-controller")
        return {"node": self._inspect(self.node(cluster), "{{.State.Running}}") == "true",
                "kwok-controller": pid is not None and _alive(pid)}

    def restart_component(self, cluster: str, component: str, meanwhile: Callable[[], None] | None = None) -> None:
        """Take a control-plane program's static pod out of the kubelet's folder, wait for it to stop, and
        put it back as a new pod (under another name), which starts at once.

        Killing the program would do once, but the kubelet holds back a container that keeps dying (10 s,
        then 20 s, 40 s...). Everything runs inside the node, so it needs no rights over its processes."""
        manifest, parked = f"/etc/kubernetes/manifests/{component}.yaml", f"/etc/kubernetes/{component}.yaml.parked"
        # An earlier restart cut off half-way (the node stopped, say) may have left the pod out: back in first.
        self._exec(cluster, "sh", "-c", f"if [ -f {parked} ]; then mv {parked} {manifest}; fi")
        pid = self.pids(cluster).get(component)
        if pid is None:
            self._wait_for(cluster, lambda: self.pids(cluster).get(component) is not None,
                           f"{component} of {cluster} is not running in its node")
            pid = self.pids(cluster)[component]
        pod = yaml.safe_load(self._exec(cluster, "cat", manifest).stdout)
        self._exec(cluster, "mv", manifest, parked)
        try:
            self._wait_for(cluster, lambda: not _alive(pid), f"the kubelet did not stop {component}")
            if meanwhile is not None:
                meanwhile()
        finally:
            # Under another name: the kubelet holds a new pod of the same name back until the old one's
            # termination is through, and then for its pod workers' back-off of 10 s.
            name = pod["metadata"]["name"]
            pod["metadata"]["name"] = name[:-len(AGAIN)] if name.endswith(AGAIN) else name + AGAIN
            # And never the very pod of two restarts ago (its uid is a hash of the manifest).
            pod["metadata"].setdefault("annotations", {})["krmcourse/restarted"] = str(time.time_ns())
            # Written beside the folder and moved in: the kubelet reads every file in it, half-written ones too.
            self._exec(cluster, "sh", "-c", f"cat > {parked} && mv {parked} {manifest}", input=yaml.safe_dump(pod))
        self._wait_for(cluster, lambda: self.pids(cluster).get(component) not in (None, pid),
                       f"the kubelet did not start {component} again")

    def _wait_for(self, cluster: str, done: Callable[[], bool], what: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                raise ClusterError(f"{what} within {timeout:.0f} s.", "'krmcourse reset' the lab; "
                                   f"'{self.engine} exec {self.node(cluster)} crictl ps -a' shows what its node runs.")
            time.sleep(0.2)

    def restart_stopped(self, cluster: str) -> list[str]:
        """Start kwok again if it stopped; a stopped node container means recreating the cluster."""
        health = self.health(cluster)
        if health["kwok-controller"] or not health["node"]:
            return []
        if not (self.folder(cluster) / "bin" / "kwok").exists():
            return []
        self._run_kwok(self.folder(cluster))
        return ["kwok-controller"]

    # ------------------------------------------------------------------------- seams
    def host_address(self, cluster: str) -> str:
        """The node's gateway on its container network: where this machine answers the API server."""
        try:
            networks = json.loads(self._inspect(self.node(cluster), "{{json .NetworkSettings.Networks}}") or "{}")
        except ValueError:
            networks = {}
        for network in networks.values():
            if network.get("Gateway"):
                return str(network["Gateway"])
        raise ClusterError(f"Could not find the container network gateway of {self.node(cluster)}.",
                           f"Check that the node container runs: '{self.engine} ps'.")

    def apiserver_flags(self, cluster: str) -> dict[str, str]:
        """From the static pod manifest kubeadm wrote, which is what the kubelet runs."""
        manifest = yaml.safe_load(self._exec(cluster, "cat", "/etc/kubernetes/manifests/kube-apiserver.yaml").stdout)
        container = manifest["spec"]["containers"][0]
        return flags_of(["kube-apiserver", *container.get("command", [])[1:], *container.get("args", [])])

    def etcd_call(self, cluster: str, call: str, body: dict[str, Any]) -> dict[str, Any]:
        """Ask etcd itself, inside the node, through its HTTP gateway with kubeadm's client certificate."""
        pki = "/etc/kubernetes/pki/etcd"
        done = self._exec(cluster, "curl", "-sS", "--fail", "--cacert", f"{pki}/ca.crt", "--cert",
                          f"{pki}/healthcheck-client.crt", "--key", f"{pki}/healthcheck-client.key",
                          f"https://127.0.0.1:2379/v3/{call}", "--data-binary", "@-", input=json.dumps(body))
        answer: dict[str, Any] = json.loads(done.stdout)
        return answer


#: What kind's known issues recommend: each node's systemd, kubelet and containerd hold inotify
#: instances, and Linux allows 128 per user by default, which a few clusters at once use up.
INOTIFY_INSTANCES = 512


def inotify_advice() -> str:
    """A sentence for errors when this machine allows fewer inotify instances than kind nodes need."""
    try:
        allowed = int(Path("/proc/sys/fs/inotify/max_user_instances").read_text())
    except (OSError, ValueError):
        return ""
    if allowed >= INOTIFY_INSTANCES:
        return ""
    return (f" This machine allows {allowed} inotify instances per user and several kind nodes need more: "
            f"'sudo sysctl fs.inotify.max_user_instances={INOTIFY_INSTANCES}' (a node whose systemd cannot get "
            "one stops at once).")


def _may_lower_oom_scores() -> bool:
    """Whether this machine grants CAP_SYS_RESOURCE (bit 24 of the bounding set) to what it runs."""
    try:
        with open("/proc/self/status") as fh:
            bounding = next(line.split()[1] for line in fh if line.startswith("CapBnd:"))
    except (OSError, StopIteration):
        return True
    return bool(int(bounding, 16) >> 24 & 1)


def cni_config() -> dict[str, Any]:
    """A CNI configuration for the one real node: a veth per pod, addresses from the node's range."""
    return {"cniVersion": "0.4.0", "name": "krmcourse", "plugins": [
        {"type": "ptp", "ipMasq": True, "mtu": 1500,
         "ipam": {"type": "host-local", "ranges": [[{"subnet": NODE_POD_RANGE}]], "routes": [{"dst": "0.0.0.0/0"}]}},
        {"type": "portmap", "capabilities": {"portMappings": True}},
    ]}
