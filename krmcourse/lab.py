"""``Lab``: one lab's own real cluster, and everything a notebook does with it.

>>> from krmcourse import Lab
>>> with Lab("welcome") as lab:                       # doctest: +SKIP
...     print(lab.kubectl("get", "nodes"))
"""

from __future__ import annotations

import errno
import hashlib
import inspect
import json
import os
import shutil
import sys
import textwrap
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar, cast

import yaml

from . import catalog, exercises, kubectl, probe, providers, reads, snapshots
from .errors import (
    CheckFailed,
    ClusterError,
    ComponentStoppedError,
    KubectlError,
    LabNotUpError,
    UsageError,
    WaitTimeout,
)
from .labcode import lab_module
from .paths import file_lock, private_file, state_dir
from .processes import ManagedProcess, kill_recorded, live_processes, stop_recorded
from .providers import ClusterOptions, Provider

T = TypeVar("T")
Say = Callable[[str], None]

#: The label of the nodes kwok simulates, on every provider: select nodes by it, never by name.
SIMULATED_NODES = "type=kwok"
#: What to do when a wait runs out, unless the caller knows better.
WAIT_HINT = ("Look at what should have made it happen: 'krmcourse logs LAB' lists the lab's running "
             "controllers and 'krmcourse logs LAB NAME' shows one's output (lab.running() and lab.logs(NAME) "
             "in a notebook); 'kubectl describe' shows an object's events; 'krmcourse doctor' checks the "
             "cluster itself.")
NODE_PREFIX = "kwok-node-"
#: The file in a cluster's home folder that records its lab, instance and provider.
RECORD = "lab.json"


def _status(msg: str) -> None:
    """Status lines go to standard output: they are news, not errors (JupyterLab shows stderr in red)."""
    print(msg, flush=True)


class Lab:
    """A lab and its cluster. Nothing starts until :meth:`up` (or ``with Lab(...)``)."""

    def __init__(self, name: str, *, instance: str | None = None, provider: str | Provider | None = None,
                 say: Say | None = None) -> None:
        self.spec = catalog.get(name)
        self.name = name
        self.instance = instance
        if instance is not None and not catalog.NAME.match(instance):
            raise UsageError(f"Instance name {instance!r} is not lowercase words joined by hyphens.",
                             "Use a short name such as 'east'.")
        self.cluster = f"krm-{name}" + (f"-{instance}" if instance else "")
        self._provider_choice = provider
        self._provider: Provider | None = provider if isinstance(provider, Provider) else None
        self._api: Any = None
        self._reads: reads.Reader | None = None
        self._processes: dict[str, ManagedProcess] = {}
        #: Seconds from the start of the last cluster creation to each step of it, for benchmarks/.
        self.startup: dict[str, float] = {}
        self.say: Say = say or _status
        self._exclusive_held = False

    # ----------------------------------------------------------------- where things are
    @property
    def path(self) -> Path:
        return self.spec.path

    @property
    def home(self) -> Path:
        """krmcourse's own folder for this cluster: provider record, identities, process logs."""
        return state_dir() / "labs" / self.cluster

    @property
    def provider(self) -> Provider:
        if self._provider is None:
            choice = self._provider_choice if isinstance(self._provider_choice, str) else None
            record = recorded(self.cluster)
            if choice is None and record:
                choice = record["provider"]
            self._provider = providers.select(choice)
        return self._provider

    @property
    def kubeconfig(self) -> Path:
        return self.provider.kubeconfig(self.cluster)

    @property
    def server(self) -> str:
        config = yaml.safe_load(self.kubeconfig.read_text())
        return str(config["clusters"][0]["cluster"]["server"])

    @property
    def audit_log(self) -> Path | None:
        return self.provider.audit_log(self.cluster)

    @property
    def exercises(self) -> list[str]:
        return [e.id for e in self.spec.exercises]

    # ----------------------------------------------------------------- lifecycle
    def status(self) -> dict[str, Any]:
        """What is running: exists, per-component health, API readiness, and the lab's own processes."""
        provider = self.provider
        exists = provider.exists(self.cluster)
        health = provider.health(self.cluster) if exists else {}
        ready = exists and all(health.values()) and self.api_ready()
        return {"lab": self.name, "cluster": self.cluster, "provider": provider.name, "exists": exists,
                "components": health, "ready": bool(ready), "processes": self.running(),
                "kubeconfig": str(self.kubeconfig) if exists else None}

    def is_up(self) -> bool:
        """Whether the lab's cluster exists, with its kubeconfig (healthy or not: see :meth:`status`)."""
        return self.provider.exists(self.cluster) and self.kubeconfig.is_file()

    def require_up(self) -> Lab:
        """The one precondition of everything that needs the lab's cluster (``krmcourse env``, ``kubectl``,
        ``check``, ``solve``, and :meth:`check` and :meth:`solve` here): LabNotUpError unless it is up."""
        if not self.is_up():
            raise LabNotUpError(self.name, self.instance)
        return self

    def api_ready(self) -> bool:
        """Whether the lab's API server answers ``/readyz`` with ok (False while it is down or starting)."""
        fast = self._probe()
        if fast is not None:
            try:
                return fast.ready()
            finally:
                fast.close()
        try:
            return kubectl.run(self.kubeconfig, ["get", "--raw", "/readyz"], check=False,
                               timeout=10).stdout.strip() == "ok"
        except Exception:  # noqa: BLE001 - any failure means "not ready"
            return False

    def _probe(self) -> probe.ApiProbe | None:
        return probe.for_kubeconfig(self.kubeconfig)

    def _private_kubeconfig(self) -> None:
        """The kubeconfig holds the cluster's admin credentials: readable by its owner only."""
        mode = self.kubeconfig.stat().st_mode & 0o777
        if mode & 0o077:
            self.kubeconfig.chmod(0o600)
            self.say(f"Lab {self.name}: its kubeconfig {self.kubeconfig} was readable by others (mode "
                     f"{mode:o}); it holds the cluster's credentials, so it is the owner's only again (600).")

    def _broken_reason(self) -> str | None:
        """Why an existing cluster cannot be reused, or None when it is healthy."""
        if not self.kubeconfig.is_file():
            return f"its state folder is incomplete (no kubeconfig at {self.kubeconfig})"
        down = [c for c, ok in self.provider.health(self.cluster).items() if not ok]
        if down:
            return f"{', '.join(down)} {'is' if len(down) == 1 else 'are'} not running"
        if not self.api_ready():
            return "its API server does not answer /readyz"
        return None

    def up(self, at: str | None = None, port: int | None = None) -> Lab:
        """Bring the lab's cluster up (reusing a healthy one), then solve exercises before ``at``."""
        if at is not None:
            self.spec.exercise(at)  # an unknown exercise fails before anything starts
        with self._exclusive():
            return self._up(at, port)

    @contextmanager
    def _exclusive(self) -> Iterator[None]:
        """One ``up``, ``down`` or ``reset`` of this cluster at a time, across processes (a notebook and a
        terminal, say): a second one waits, then finds the cluster as the first one left it."""
        if self._exclusive_held:  # reset runs up inside its own hold
            yield
            return

        def waiting() -> None:
            self.say(f"Lab {self.name}: another krmcourse command is starting or stopping {self.cluster}; "
                     "waiting for it to finish.")

        with file_lock(lock_path(self.cluster), waiting, remove=lambda: not self.home.exists()):
            self._exclusive_held = True
            try:
                yield
            finally:
                self._exclusive_held = False

    def _up(self, at: str | None, port: int | None) -> Lab:
        provider = self.provider
        if provider.exists(self.cluster):
            reason = self._broken_reason()
            if reason is None:
                self._private_kubeconfig()
                self.say(f"Lab {self.name}: reusing the running cluster {self.cluster}.")
                self._solve_before(at)  # on top of the learner's work: reset --at is what puts it back
                return self
            self.say(f"Lab {self.name}: the cluster {self.cluster} is broken ({reason}); recreating it.")
            self._teardown()
        else:
            kill_recorded(self.home / "processes")  # controllers of a cluster deleted behind our back
        started = time.monotonic()
        with lab_allowance(self.cluster):  # checked and taken at once: two ups at a time cannot both pass
            require_disk_space()
            self._create_with_retry(port)
        self.say(f"Lab {self.name}: cluster {self.cluster} is ready in {time.monotonic() - started:.1f} s "
                 f"(provider {provider.name}).")
        snapshots.save(self, snapshots.state_at(None))
        self._solve_before(at, save=True)
        return self

    def _create_with_retry(self, port: int | None) -> None:
        """Create the cluster, once more if a component died while it started; on any failure (Ctrl-C
        included), leave no process, port or folder behind."""
        for attempt in (1, 2):
            try:
                self._create(port)
                break
            except ComponentStoppedError:
                # A component can give up when the API server is slow to answer on a loaded machine, and
                # nothing restarts it then; one fresh attempt clears that.
                self._keep_logs()
                self._teardown()
                if attempt == 2:
                    raise
                self.say(f"Lab {self.name}: a component died while the cluster started; trying once more.")
            except ClusterError as exc:
                self._keep_logs()
                self._teardown()
                require_disk_space(cause=exc)  # a component that died for want of disk says why
                raise
            except BaseException as exc:
                # Ctrl-C or a failure half-way: leave no process, port or folder behind, but keep the
                # component logs of a failure so that the reason can still be read.
                if not isinstance(exc, KeyboardInterrupt):
                    self._keep_logs()
                self._teardown()
                if isinstance(exc, KeyboardInterrupt):
                    self.say(f"Lab {self.name}: interrupted; everything it had started was stopped.")
                else:
                    require_disk_space(cause=exc)
                raise

    def _create(self, port: int | None) -> None:
        started = time.monotonic()
        self.startup.clear()
        self.home.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(snapshots.folder(self), ignore_errors=True)  # an earlier cluster's, if its folder stayed
        (self.home / RECORD).write_text(json.dumps({"lab": self.name, "instance": self.instance,
                                                    "provider": self.provider.name}))
        self.provider.create(self._options(port), self.say)
        self.startup["cluster created"] = time.monotonic() - started
        self._forget_api()
        self._wait_ready(started)
        self._apply_manifests()
        self.startup["manifests applied"] = time.monotonic() - started

    def _options(self, port: int | None) -> ClusterOptions:
        cluster = self.spec.cluster
        return ClusterOptions(
            cluster=self.cluster, port=port, audit=bool(cluster.get("audit", True)),
            stages=[self.path / s for s in cluster.get("stages", [])],
            apiserver_args={str(k): str(v) for k, v in (cluster.get("apiserver_args") or {}).items()})

    def _wait_ready(self, started: float, timeout: float = 120) -> None:
        """Ready means: the API answers, the nodes are Ready, and the default ServiceAccount exists."""
        fast = self._probe()
        try:
            api_ready = fast.ready if fast else self.api_ready
            self.wait_until(api_ready, timeout=timeout, interval=0.05 if fast else 0.1,
                            message=f"the API server of {self.cluster} did not become ready")
            self.startup["API ready"] = time.monotonic() - started
            # kube-controller-manager gives up when the API server is not healthy 10 s after it asked, which
            # happens on a busy machine. Now that the API is ready, a second start cannot fail that way.
            restarted = self.provider.restart_stopped(self.cluster)
            if restarted:
                self.say(f"Lab {self.name}: {', '.join(restarted)} stopped while the API server was starting; "
                         "started again.")
            if self.simulates_nodes and self.spec.nodes > 0:
                self._create_nodes(fast)
            # Both come from controllers (kwok marks nodes Ready, kube-controller-manager creates the
            # ServiceAccount), so wait for them together, and stop waiting if a component stops.
            self.wait_until(lambda: self._all_running() and self._nodes_ready(fast)
                            and self._default_service_account(fast),
                            timeout=timeout, interval=0.05 if fast else 0.1,
                            message="the simulated nodes did not become Ready, or the default ServiceAccount "
                            "was never created")
            # A component can die without the API noticing (say, the scheduler losing a port race):
            # ready means every process is still running, too.
            self._all_running()
            self.startup["nodes and ServiceAccount ready"] = time.monotonic() - started
        except (TimeoutError, KubectlError) as exc:
            down = [c for c, ok in self.provider.health(self.cluster).items() if not ok]
            detail = "".join(self._log_tail(c) for c in down[:2])
            error = ComponentStoppedError if down else ClusterError
            raise error(f"Lab {self.name}: {exc}." + (f" Not running: {', '.join(down)}." if down else "")
                        + detail,
                        f"See the component logs in {self.kubeconfig.parent / 'logs'}; "
                        f"'krmcourse reset {self.name}' tries again from scratch.") from exc
        finally:
            if fast is not None:
                fast.close()

    def _keep_logs(self) -> None:
        logs = self.kubeconfig.parent / "logs"
        if logs.is_dir():
            target = state_dir() / "failed" / f"{self.cluster}-{time.strftime('%Y%m%d-%H%M%S')}"
            shutil.copytree(logs, target, dirs_exist_ok=True)
            self.say(f"Lab {self.name}: the component logs of the failed start are kept in {target}.")

    def _log_tail(self, component: str, lines: int = 8) -> str:
        log = self.kubeconfig.parent / "logs" / f"{component}.log"
        if not log.is_file():
            return ""
        tail = log.read_text(errors="replace").strip().splitlines()[-lines:]
        return f"\n--- last lines of {component}.log ---\n" + "\n".join(tail)

    @property
    def simulates_nodes(self) -> bool:
        """Whether kwok looks after this lab's nodes (it does on every provider that owns its cluster)."""
        return self.provider.can("simulated-nodes")

    def _nodes_ready(self, fast: probe.ApiProbe | None = None) -> bool:
        if not self.simulates_nodes or self.spec.nodes == 0:
            return True
        path = f"/api/v1/nodes?labelSelector={SIMULATED_NODES}"
        nodes = ((fast.get_json(path) or {}).get("items", []) if fast else
                 self.objects("nodes", selector=SIMULATED_NODES))
        ready = [n for n in nodes
                 if any(c["type"] == "Ready" and c["status"] == "True"
                        for c in n.get("status", {}).get("conditions", []))]
        return len(ready) >= self.spec.nodes

    def _all_running(self) -> bool:
        if not all(self.provider.health(self.cluster).values()):
            raise TimeoutError("a component stopped while the cluster started")
        return True

    def _create_nodes(self, fast: probe.ApiProbe | None) -> None:
        nodes = [_node(f"{NODE_PREFIX}{i}") for i in range(self.spec.nodes)]
        if fast is None:
            self.apply(nodes)
            return
        for node in nodes:
            self._create_node(fast, node)

    def _create_node(self, fast: probe.ApiProbe, node: dict[str, Any]) -> None:
        """No answer in time (a loaded machine), a 429 or a 5xx is worth another try; a 409 means that an
        earlier try that timed out had made it after all. Anything else is final."""
        name, answers = node["metadata"]["name"], []

        def made() -> bool:
            answers.append(fast.create("/api/v1/nodes", node))
            status = answers[-1]
            if status in (201, 409):
                return True
            if status is not None and status < 500 and status != 429:
                raise ClusterError(f"Lab {self.name}: the API server answered {status} to creating node {name}.",
                                   f"'krmcourse reset {self.name}' tries again from scratch.")
            return False

        try:
            self.wait_until(made, timeout=60, interval=0.5)
        except TimeoutError:
            raise ClusterError(f"Lab {self.name}: creating node {name} got only {answers[-3:]} in 60 s "
                               f"({len(answers)} tries; None is no answer in time).",
                               f"'krmcourse reset {self.name}' tries again from scratch; if it fails again, "
                               "'krmcourse doctor' checks the machine.") from None

    def _default_service_account(self, fast: probe.ApiProbe | None = None) -> bool:
        if fast:
            return fast.get_json("/api/v1/namespaces/default/serviceaccounts/default") is not None
        return self.get("serviceaccount", "default", namespace="default") is not None

    def _apply_manifests(self) -> None:
        defined = False
        for manifest in self.spec.manifests:
            docs = [d for d in yaml.safe_load_all(manifest.read_text()) if d]
            self.apply(manifest)
            if any(d.get("kind") == "CustomResourceDefinition" for d in docs):
                names = [f"crd/{d['metadata']['name']}" for d in docs if d.get("kind") == "CustomResourceDefinition"]
                self.wait_for(" ".join(names), "condition=Established", timeout=60)
                defined = True
        if defined:
            # kube-controller-manager's garbage collector looks for new kinds only every 30 s, and holds back
            # the dependents of an owner whose kind it does not know yet, retrying later each time: a lab's
            # first deletion of a custom resource then waited 20 to 40 s for its children to go. Started
            # afresh now (as a snapshot restore does), it watches the lab's kinds from the beginning.
            self.provider.restart_component(self.cluster, "kube-controller-manager")

    def _solve_before(self, at: str | None, first: int = 0, save: bool = False) -> None:
        """Solve the exercises before ``at``, from the ``first``; ``save`` snapshots each state reached
        (only a lab that started clean reaches the states its snapshots name)."""
        if at is None:
            return
        ids = [ex.id for ex in self.spec.exercises]
        for i in range(first, ids.index(at)):
            self.say(f"Lab {self.name}: solving {ids[i]} to skip ahead.")
            self.solve(ids[i])
            if save:
                snapshots.save(self, snapshots.state_at(ids[i + 1]))

    def _restore_to(self, at: str | None) -> bool:
        """Restore the latest snapshot on the way to ``at`` (``None``: the start) and solve the rest;
        False, with nothing changed, when there is none."""
        ids = [ex.id for ex in self.spec.exercises]
        for i in range(ids.index(at) if at else 0, -1, -1):
            try:
                restored = snapshots.restore(self, snapshots.state_at(ids[i] if i else None))
            except Exception as exc:  # noqa: BLE001 - whatever went wrong, a new cluster is the way out
                self.say(f"Lab {self.name}: restoring a snapshot failed ({exc}); deleting the snapshots and "
                         "making the cluster again.")
                shutil.rmtree(snapshots.folder(self), ignore_errors=True)
                return False
            if restored:
                self._processes.clear()  # the restore stopped them, and started the snapshot's own
                self._solve_before(at, first=i, save=True)
                return True
        return False

    def down(self) -> None:
        """Stop the lab's processes and delete its cluster: no process, port or folder is left."""
        with self._exclusive():
            self._teardown()
        self.say(f"Lab {self.name}: cluster {self.cluster} deleted.")

    def _teardown(self) -> None:
        for proc in list(self._processes.values()):
            proc.stop(timeout=5)
        self._processes.clear()
        kill_recorded(self.home / "processes")
        provider = self.provider
        if provider.owns_clusters():
            provider.delete(self.cluster)
        else:
            self._delete_manifests()
            provider.delete(self.cluster)
        self._forget_api()
        shutil.rmtree(self.home, ignore_errors=True)

    def _delete_manifests(self) -> None:
        if not self.kubeconfig.is_file():
            return
        for manifest in reversed(self.spec.manifests):
            self.kubectl("delete", "-f", str(manifest), "--ignore-not-found", "--wait=false", check=False)

    def reset(self, at: str | None = None) -> Lab:
        """Start the lab afresh (optionally at exercise ``at``, its earlier ones solved).

        A healthy cluster is put back in place from the snapshots taken when it first reached that state
        (see :mod:`krmcourse.snapshots`), solving only what no snapshot holds; a broken one, or one
        without snapshots, is thrown away and made again."""
        if at is not None:
            self.spec.exercise(at)  # an unknown exercise fails before the cluster is thrown away
        with self._exclusive():
            if self.provider.exists(self.cluster) and self._broken_reason() is None and self._restore_to(at):
                self._private_kubeconfig()
                exercises.forget_results(self)  # as a cluster made again has none: no check has run on it
                return self
            self._teardown()
            return self.up(at=at)

    def __enter__(self) -> Lab:
        return self.up()

    def __exit__(self, *exc: object) -> None:
        self.down()

    def __repr__(self) -> str:
        return f"<Lab {self.name} cluster={self.cluster}>"

    # ----------------------------------------------------------------- talking to the cluster
    @property
    def api(self) -> Any:
        """A kr8s API client bound to this lab's cluster alone."""
        if self._api is None:
            import kr8s

            # kr8s 0.20 warns about any Kubernetes newer than it was tested with; 1.36 works for
            # everything the course does, and the warning would only confuse learners.
            warnings.filterwarnings("ignore", message="Kubernetes version .* is not supported")
            self._api = kr8s.api(kubeconfig=str(self.kubeconfig))
        return self._api

    def _forget_api(self) -> None:
        """kr8s caches clients by their arguments; a recreated cluster has new certificates."""
        self._api = None
        if self._reads is not None:
            self._reads.close()
        try:
            from kr8s._api import Api

            for cache in Api._instances.values():
                for key, value in list(cache.items()):
                    if getattr(value, "_kubeconfig", None) == str(self.kubeconfig):
                        del cache[key]
        except Exception:  # noqa: BLE001 - the cache is an optimisation of kr8s, not ours
            pass

    def kubectl(self, *args: str, input: str | None = None, check: bool = True, timeout: float = 120) -> str:
        """Run kubectl against this lab only and return its standard output."""
        done = kubectl.run(self.kubeconfig, list(args), input=input, check=check, timeout=timeout)
        return done.stdout if check or done.returncode == 0 else done.stdout + done.stderr

    def apply(self, source: Path | str | dict[str, Any] | Iterable[dict[str, Any]], server_side: bool = False,
              field_manager: str | None = None) -> str:
        """``kubectl apply`` a file, YAML text, one object, or a list of objects."""
        args = ["apply"]
        if server_side:
            args.append("--server-side")
        if field_manager:
            args.append(f"--field-manager={field_manager}")
        if isinstance(source, Path):
            return self.kubectl(*args, "-f", str(source))
        if isinstance(source, str):
            text = source
        elif isinstance(source, dict):
            text = json.dumps(source)
        else:
            text = json.dumps({"apiVersion": "v1", "kind": "List", "items": list(source)})
        return self.kubectl(*args, "-f", "-", input=text)

    def get(self, kind: str, name: str, namespace: str | None = None,
            show_managed_fields: bool = False) -> dict[str, Any] | None:
        """The object as a dict, or None when it does not exist: what ``kubectl get KIND NAME -o json`` shows.

        ``kind`` is any name kubectl accepts (``cm``, ``deployments.apps``). It is read over the lab's one
        HTTPS connection (see :mod:`krmcourse.reads`); whatever that cannot answer goes to kubectl.
        kubectl hides ``metadata.managedFields`` unless asked; ``show_managed_fields=True`` keeps them.
        """
        if (reader := self._reader()) is not None:
            found = reader.get(kind, name, namespace, show_managed_fields)
            if found is not reads.ASK_KUBECTL:
                return cast("dict[str, Any] | None", found)
        args = ["get", kind, name, "-o", "json"] + (["-n", namespace] if namespace else [])
        if show_managed_fields:
            args.append("--show-managed-fields")
        try:
            return cast("dict[str, Any]", json.loads(self.kubectl(*args)))
        except KubectlError as exc:
            if "NotFound" in exc.stderr or "not found" in exc.stderr:
                return None
            raise

    def objects(self, kind: str, namespace: str | None = None, *, all_namespaces: bool = False,
                selector: str | None = None, field_selector: str | None = None,
                show_managed_fields: bool = False) -> list[dict[str, Any]]:
        """The objects of ``kind`` in ``namespace`` (or in all of them): the items ``kubectl get KIND -o json``
        shows, each with its kind and apiVersion. ``kind`` may name several, separated by commas
        (``"deployments,services"``); ``selector`` and ``field_selector`` are kubectl's ``-l`` and
        ``--field-selector``. Read over the lab's one HTTPS connection, as :meth:`get` reads."""
        kinds = kind.split(",")
        reader = self._reader()
        answers = (reader.objects(kinds, namespace, all_namespaces, selector, field_selector, show_managed_fields)
                   if reader is not None else [reads.ASK_KUBECTL] * len(kinds))
        found: list[dict[str, Any]] = []
        for one, items in zip(kinds, answers, strict=True):
            if items is not reads.ASK_KUBECTL:
                found += cast("list[dict[str, Any]]", items)
                continue
            args = ["get", one, "-o", "json"]
            if all_namespaces or namespace:
                args += ["-A"] if all_namespaces else ["-n", str(namespace)]
            if selector:
                args += ["-l", selector]
            if field_selector:
                args += ["--field-selector", field_selector]
            if show_managed_fields:
                args.append("--show-managed-fields")
            found += json.loads(self.kubectl(*args)).get("items") or []
        return found

    def listable_kinds(self, namespaced: bool = True) -> list[str]:
        """Every resource type of the cluster that can be listed, kept in a namespace (or, with
        ``namespaced=False``, cluster-wide): the names ``kubectl api-resources --verbs=list -o name``
        prints, such as ``configmaps`` and ``deployments.apps``. Asked of discovery afresh, as kubectl
        asks it, over the lab's one HTTPS connection."""
        if (reader := self._reader()) is not None and (names := reader.listable(namespaced)) is not reads.ASK_KUBECTL:
            return cast("list[str]", names)
        return self.kubectl("api-resources", f"--namespaced={str(namespaced).lower()}", "--verbs=list",
                            "-o", "name").split()

    def _reader(self) -> reads.Reader | None:
        """The lab's one HTTPS reader; None when ``KRMCOURSE_READS=kubectl`` asks for the old way (for
        ``benchmarks/read_path.py``)."""
        if os.environ.get("KRMCOURSE_READS") == "kubectl":
            return None
        if self._reads is None:
            self._reads = reads.Reader(self.kubeconfig)
        return self._reads

    def delete(self, kind: str, name: str, namespace: str | None = None, wait: bool = True) -> None:
        args = ["delete", kind, name, "--ignore-not-found", f"--wait={str(wait).lower()}"]
        self.kubectl(*args, *(["-n", namespace] if namespace else []))

    def wait_for(self, resource: str, condition: str, namespace: str | None = None, timeout: float = 60,
                 all: bool = False) -> str:
        """``kubectl wait --for=<condition>``, e.g. ``wait_for("deployment/web", "condition=Available")``.

        ``resource`` may name several objects, separated by spaces: ``"crd/a.example.com crd/b.example.com"``.
        """
        extra = (["--all"] if all else []) + (["-n", namespace] if namespace else [])
        deadline = time.monotonic() + timeout
        while True:
            left = max(1, int(deadline - time.monotonic()))
            try:
                return self.kubectl("wait", *resource.split(), f"--for={condition}", f"--timeout={left}s", *extra,
                                    timeout=left + 15)
            except KubectlError as exc:
                # kubectl stops at once, instead of waiting, when it finds status.conditions still null,
                # as on a CRD created a moment ago (kubernetes/kubernetes#66439): ask again.
                if "conditions accessor error: <nil>" not in exc.stderr or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    @staticmethod
    def wait_until(fn: Callable[[], T], timeout: float = 30, interval: float = 0.2,
                   message: str = "the condition did not become true", hint: str = WAIT_HINT) -> T:
        """Poll ``fn`` until it returns something truthy, and return that.

        Raises WaitTimeout (a TimeoutError) with ``message`` and ``hint`` when ``timeout`` passes first."""
        deadline = time.monotonic() + timeout
        while True:
            value = fn()
            if value:
                return value
            if time.monotonic() > deadline:
                raise WaitTimeout(f"{message} (waited {timeout:.0f} s)", hint)
            time.sleep(interval)

    def metrics(self) -> str:
        """kube-apiserver's own Prometheus metrics, as text."""
        return self.kubectl("get", "--raw", "/metrics")

    def component_pids(self) -> dict[str, int]:
        """Process ids of the components this machine runs for the cluster (all of them on kwok)."""
        return self.provider.pids(self.cluster)

    def nodes(self) -> list[str]:
        """The names of the lab's simulated nodes, found by their label (as every notebook should)."""
        return sorted(n["metadata"]["name"] for n in self.objects("nodes", selector=SIMULATED_NODES))

    @property
    def host_address(self) -> str:
        """Where a server on this machine listens for the lab's API server (webhooks): see Provider."""
        return self.provider.host_address(self.cluster)

    def can(self, capability: str) -> bool:
        """Whether the lab's provider offers a capability, e.g. ``lab.can("etcd")``."""
        return self.provider.can(capability)

    # ----------------------------------------------------------------- identities
    def can_i(self, who: str, verb: str, resource: str, namespace: str | None = None,
              subresource: str | None = None) -> bool:
        """The API server's own answer to "may ``who`` do this?" (``kubectl auth can-i --as``: a
        SelfSubjectAccessReview sent as ``who``, by impersonation, so the lab's admin credentials are
        needed). ``who`` is a user, or ``namespace/name`` for a ServiceAccount."""
        if "/" in who and ":" not in who:
            account_namespace, account = who.split("/", 1)
            who = f"system:serviceaccount:{account_namespace}:{account}"
        args = ["auth", "can-i", verb, resource, f"--as={who}"]
        if namespace:
            args += ["-n", namespace]
        if subresource:
            args.append(f"--subresource={subresource}")
        answer = self.kubectl(*args, check=False).strip().splitlines()
        return bool(answer) and answer[0].strip() == "yes"

    def kubeconfig_for(self, serviceaccount: str, namespace: str, hours: int = 12) -> Path:
        """A kubeconfig that authenticates as a ServiceAccount, for least-privilege processes."""
        token = self.kubectl("create", "token", serviceaccount, "-n", namespace,
                             f"--duration={hours}h").strip()
        admin = yaml.safe_load(self.kubeconfig.read_text())
        cluster = dict(admin["clusters"][0]["cluster"])
        user = f"system:serviceaccount:{namespace}:{serviceaccount}"
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": user,
            "clusters": [{"name": self.cluster, "cluster": cluster}],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": user, "context": {"cluster": self.cluster, "user": user,
                                                     "namespace": namespace}}],
        }
        return private_file(self.home / "identities" / f"{namespace}.{serviceaccount}.kubeconfig",
                            yaml.safe_dump(config))

    def kubectl_as(self, serviceaccount: str, namespace: str, *args: str, input: str | None = None) -> str:
        """Run kubectl with a ServiceAccount's own token; return what it printed, refusals included.

        A real token, not impersonation (``--as``), shows exactly what that identity meets at the API
        server, as a team's CI job or a controller would.
        """
        config = self.kubeconfig_for(serviceaccount, namespace)
        done = kubectl.run(config, list(args), input=input, check=False, timeout=60)
        return (done.stdout + done.stderr).strip()

    # ----------------------------------------------------------------- processes
    def _process(self, name: str, argv: list[str], env: dict[str, str] | None,
                 kubeconfig: Path | None, cwd: Path | None, script: Path) -> ManagedProcess:
        if name in self._processes:
            self._processes[name].stop()
        full_env = {**os.environ, **(env or {}), "KUBECONFIG": str(kubeconfig or self.kubeconfig),
                    "PYTHONUNBUFFERED": "1"}
        # The same command, settings, credentials and code make the same process: a later start (another
        # interpreter's, say) adopts it while it runs; an edited script starts afresh.
        code = (self.path / script).stat()  # a relative script runs from the lab folder
        # A learner's code (see save_code), passed as an argument or a setting, counts as code too: an
        # edit restarts the process, and the same code saved again does not.
        saved = [(arg, hashlib.sha256(Path(arg).read_bytes()).hexdigest())
                 for arg in [*argv, *(env or {}).values()]
                 if arg.startswith(str(self.home / "code")) and Path(arg).is_file()]
        identity = json.dumps([argv, sorted((env or {}).items()), str(kubeconfig or self.kubeconfig),
                               code.st_mtime_ns, code.st_size, saved])
        proc = ManagedProcess(name, argv, full_env, self.home / "processes", cwd=cwd or self.path,
                              identity=identity)
        self._processes[name] = proc
        return proc.start()

    def run_controller(self, script: Path | str, *args: str, name: str | None = None,
                       env: dict[str, str] | None = None, kubeconfig: Path | None = None) -> ManagedProcess:
        """Run a Python script beside the cluster, with KUBECONFIG pointing at this lab."""
        script = Path(script)
        return self._process(name or script.stem, [sys.executable, str(script), *args], env, kubeconfig,
                             None, script)

    def run_kopf(self, script: Path | str, namespace: str | None = None, name: str | None = None,
                 kubeconfig: Path | None = None, env: dict[str, str] | None = None) -> ManagedProcess:
        """Run a kopf operator as a subprocess (never inside the notebook's own event loop)."""
        script = Path(script)
        scope = ["--namespace", namespace] if namespace else ["--all-namespaces"]
        argv = [sys.executable, "-m", "kopf", "run", "--standalone", *scope, str(script)]
        return self._process(name or script.stem, argv, env, kubeconfig, None, script)

    @property
    def processes(self) -> list[ManagedProcess]:
        """The processes this Lab object started or adopted."""
        return list(self._processes.values())

    def start(self, name: str, *args: str, env: dict[str, str] | None = None, wait: bool = True,
              kubeconfig: Path | None = None) -> ManagedProcess:
        """Start a controller the lab declares in ``lab.yaml`` (or adopt its running one), ready to work.

        It runs as its ServiceAccount when one is declared (see :meth:`controller_kubeconfig`; a
        ``kubeconfig`` given here takes its place, as the fault harness's proxy does), and this waits
        for its ``ready`` log line (``wait=False`` does not: to catch it in the middle of its first
        pass, say). ``args`` replace the declared ones of a script (a kopf controller takes none). It
        runs until :meth:`stop`, ``down`` or ``reset``, whoever started it: a notebook, ``krmcourse
        solve`` or a test.
        """
        spec = self.spec.controller(name)
        if not spec.script.is_file():
            raise UsageError(f"Lab {self.name}: controller {name}'s program {spec.script} does not exist.",
                             f"Fix its 'script:' or 'kopf:' line in {self.path / 'lab.yaml'}: a path from the "
                             "lab folder.")
        if kubeconfig is None and spec.serviceaccount:
            kubeconfig = self.controller_kubeconfig(name)
        self._processes.pop(name, None)  # so that the start below adopts it when it is the same
        if spec.kopf:
            proc = self.run_kopf(spec.script, name=name, kubeconfig=kubeconfig, env=env)
        else:
            proc = self.run_controller(spec.script, *(args or spec.args), name=name, env=env, kubeconfig=kubeconfig)
        if spec.ready and wait:
            proc.wait_for_log(spec.ready, timeout=60)
        return proc

    def controller_kubeconfig(self, name: str) -> Path:
        """The kubeconfig a declared controller runs with: its ServiceAccount's, or the lab's own."""
        spec = self.spec.controller(name)
        if not spec.serviceaccount:
            return self.kubeconfig
        namespace, account = spec.serviceaccount.split("/")
        return self.kubeconfig_for(account, namespace)

    def stop(self, name: str) -> bool:
        """Stop one of the lab's processes by name, whoever started it; False when it was not running."""
        self._processes.pop(name, None)
        return stop_recorded(self.home / "processes", name)

    def running(self) -> dict[str, int]:
        """Every process of the lab that runs now, name to pid, whoever started it (a notebook, ``solve``)."""
        return live_processes(self.home / "processes")

    def logs(self, name: str, lines: int = 40) -> str:
        """The last ``lines`` lines a lab process (see :meth:`running`) has written."""
        log = self.home / "processes" / f"{name}.log"
        if not log.exists():
            known = ", ".join(sorted(p.stem for p in log.parent.glob("*.log"))) or "none yet"
            raise UsageError(f"Lab {self.name} has no process called {name!r}.", f"Its processes: {known}.")
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])

    def save_code(self, name: str, code: str | Callable[..., Any]) -> Path:
        """Keep a learner's code where the lab's controllers can load it, and return its path.

        ``code`` is a function defined in the notebook (its source is saved, as written) or source text.
        It becomes ``<home>/code/<name>.py`` (mode 0600): pass that path to a declared controller,
        ``lab.start("cache-controller", "--predicate", str(path))``, which loads it with
        :func:`krmcourse.labcode.script_module`; an edited file makes ``start`` restart the controller.
        """
        if not catalog.NAME.match(name):
            raise UsageError(f"Code name {name!r} is not lowercase words joined by hyphens.",
                             "Use a short name such as 'predicate'.")
        if callable(code):
            try:
                code = inspect.getsource(code)
            except (OSError, TypeError) as err:
                raise UsageError(f"Cannot read the source of {code!r}: {err}.",
                                 "Define it with 'def' in a notebook cell or a file, not with exec.") from None
        path = self.home / "code" / f"{name.replace('-', '_')}.py"
        private_file(path, textwrap.dedent(code))
        return path

    # ----------------------------------------------------------------- exercises
    def support(self, module: str) -> ModuleType:
        """One of the lab's own Python modules: ``labs/<lab>/<module>.py``, a package there, or a module of
        one (``greeter.model``), imported once under a lab-qualified name (see :mod:`krmcourse.labcode`).

        Notebooks and exercise checks call the lab's plumbing through this, e.g.
        ``pat = lab.support("patterns_support")``.
        """
        return lab_module(self.name, module, self.path)

    def check(self, exercise: str) -> None:
        """Raise CheckFailed with a hint unless the cluster solves ``exercise``."""
        exercises.check(self, exercise)
        self.say(f"Lab {self.name}: {exercise} solved.")

    def solved(self, exercise: str) -> bool:
        """Whether the cluster solves ``exercise`` now, said quietly: for polling until a solution takes
        effect (``lab.wait_until(lambda: lab.solved("map-list"))``)."""
        try:
            exercises.check(self, exercise)
        except CheckFailed:
            return False
        return True

    def solve(self, exercise: str) -> None:
        """Apply the reference solution of ``exercise``."""
        exercises.solve(self, exercise)

    def show_solution(self, exercise: str, apply: bool | None = None) -> None:
        """A notebook's solution cell: print the reference solution, and apply it only when asked.

        "Run All" in a learner's notebook therefore applies no solution: it stops at the first check
        the learner has not solved yet. ``apply=True`` applies it (as ``krmcourse solve`` does); the
        test suite sets ``KRMCOURSE_SOLUTIONS=apply``, so that every notebook runs to its end there.
        """
        path, source = exercises.solution_source(self, exercise)
        self.say(f"The reference solution of {exercise} ({path}):\n\n{source}")
        if apply is None:
            apply = os.environ.get(exercises.SOLUTIONS_ENV) == "apply"
        if not apply:
            self.say(f"Not applied: try the exercise yourself first. To apply this solution, run "
                     f"lab.show_solution({exercise!r}, apply=True), or in a terminal: "
                     f"krmcourse solve {self.name} {exercise}")
            return
        self.solve(exercise)
        self.say(f"Applied the reference solution of {exercise}; the check below shows the result.")


def lock_path(cluster: str) -> Path:
    """The file that ``up``, ``down`` and ``reset`` of ``cluster`` lock; it goes with the cluster."""
    return state_dir() / "locks" / f"{cluster}.lock"


#: Below this much free space where cluster state lives, ``up`` refuses to start: etcd and the component
#: logs of a lab need a few tens of MiB, and a disk that fills mid-start leaves only a puzzling failure.
MIN_FREE_MIB = 200


#: How many lab clusters one user may keep up at once; unset means no limit. A workshop hub sets it for
#: its learners (``krmcourse hub start --max-labs``), so that one learner cannot take the room's memory.
MAX_LABS_ENV = "KRMCOURSE_MAX_LABS"


@contextmanager
def lab_allowance(cluster: str) -> Iterator[None]:
    """Check ``KRMCOURSE_MAX_LABS`` (:func:`require_lab_allowance`) and keep the learner's other ``up``
    commands waiting while the block creates the cluster, so that two at once cannot both pass the check."""
    if not os.environ.get(MAX_LABS_ENV):
        yield
        return
    with file_lock(state_dir() / ".lab-allowance.lock", remove=lambda: True):
        require_lab_allowance(cluster)
        yield


def require_lab_allowance(cluster: str) -> None:
    """Raise UsageError, saying what to do, when a new cluster would pass ``KRMCOURSE_MAX_LABS``."""
    text = os.environ.get(MAX_LABS_ENV)
    if not text:
        return
    if not text.isdigit() or int(text) < 1:
        raise UsageError(f"{MAX_LABS_ENV}={text!r} is not a number of lab clusters.",
                         f"Set {MAX_LABS_ENV} to 1 or more, or unset it for no limit.")
    up = sorted({c for p in providers.owning_providers() for c in p.clusters() if c != cluster})
    if len(up) >= int(text):
        raise UsageError(f"You have {len(up)} lab clusters up ({', '.join(up)}), the most allowed here "
                         f"({MAX_LABS_ENV}={text}); {cluster} was not started.",
                         "Take one down first: 'krmcourse down LAB' in a terminal, or lab.down() in its notebook "
                         "('krmcourse status' lists them), then start this one again.")


def require_disk_space(cause: BaseException | None = None) -> None:
    """Raise ClusterError, saying what to do, when the disk that holds cluster state is (nearly) full.

    Called before a cluster is created, and again after a creation failed (``cause``), so that a
    component that died of a full disk is reported as that rather than as its own last words.
    """
    folder = state_dir()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    free_mib = shutil.disk_usage(folder).free // 2**20
    full = isinstance(cause, OSError) and cause.errno == errno.ENOSPC
    if free_mib < MIN_FREE_MIB or full:
        raise ClusterError(
            f"The disk that holds krmcourse's cluster state ({state_dir()}) has only {free_mib} MiB free; a lab "
            f"cluster needs at least {MIN_FREE_MIB} MiB. Nothing was started, or it was all stopped again.",
            "Free some space (krmcourse doctor shows the lab clusters; `krmcourse down --all` removes them), or "
            "set KRMCOURSE_HOME to a folder on a disk with room.") from cause


def recorded(cluster: str) -> dict[str, Any] | None:
    """What created a cluster of this state folder: its lab, instance and provider; None if unknown."""
    try:
        record = json.loads((state_dir() / "labs" / cluster / RECORD).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and {"lab", "provider"} <= record.keys() else None


def _node(name: str) -> dict[str, Any]:
    """A Node that kwok will look after: it becomes Ready and runs the pods scheduled on it."""
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
                     "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                "kubernetes.io/arch": "amd64", "type": "kwok"}},
        "status": {"allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"},
                   "capacity": {"cpu": "32", "memory": "256Gi", "pods": "110"}},
    }
