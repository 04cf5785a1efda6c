"""krmcourse as a pytest plugin: a real API server for the tests of a Python operator (a Python envtest).

Installing the package registers this plugin (the ``pytest11`` entry point), so any project gets:

- ``krm_cluster`` (session): a cluster of the session's own (etcd, kube-apiserver, kube-controller-manager,
  kube-scheduler, on kwok or kind), with every manifest of the CRD folder applied and its CRDs established;
- ``krm_lab`` (each test): that cluster put back, before the test, in the state it had once the CRDs were in.
  A snapshot restore, not a new cluster: what one test made is gone for the next;
- ``krm_api``: a kr8s client bound to the cluster;
- ``krm_controller``: runs a controller (a kopf operator, or any Python program) for the length of the
  test, and stops it afterwards; when the test fails, the report shows the controller's log.

The CRD folder is ``--krm-crds PATH``, or ``krm_crds = PATH`` in the project's pytest configuration, or a
``krm_crds`` fixture of the project's own that returns a folder (or None: no CRDs). ``KRMCOURSE_PROVIDER``
chooses the provider, as everywhere in krmcourse.

>>> def test_a_widget_gets_a_status(krm_lab, krm_controller):      # doctest: +SKIP
...     krm_controller("operator.py", ready="widget operator ready")
...     krm_lab.apply({"apiVersion": "example.com/v1", "kind": "Widget",
...                    "metadata": {"name": "w", "namespace": "default"}, "spec": {"size": 1}})
...     krm_lab.wait_for("widget/w", "jsonpath={.status.ready}=true", namespace="default")
"""

from __future__ import annotations

import os
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest
import yaml

from . import snapshots
from .errors import KrmcourseError, UsageError
from .lab import Lab
from .processes import ManagedProcess

#: The lab every plugin session runs on: an empty cluster with one simulated node.
LAB = "sandbox"
#: The snapshot each test starts from: the session's cluster with the CRDs in.
BASELINE = "pytest-baseline"
_STARTED = pytest.StashKey[list[ManagedProcess]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("krmcourse", "krmcourse: a real Kubernetes API server for your tests")
    group.addoption("--krm-crds", metavar="PATH", default=None,
                    help="folder of CRDs (and other manifests) applied to the session's cluster")
    parser.addini("krm_crds", "folder of CRDs applied to the session's cluster, relative to the rootdir")


def _fail(exc: KrmcourseError | str) -> NoReturn:
    """Stop with krmcourse's own words (what happened, and what to do next), never a traceback: and not
    twice, as an exception raised while handling another would be."""
    raise pytest.fail.Exception(str(exc), pytrace=False) from None


@pytest.fixture(scope="session")
def krm_crds(pytestconfig: pytest.Config) -> Path | None:
    """The folder of manifests the session's cluster starts with; override this fixture to choose another."""
    given = pytestconfig.getoption("krm_crds") or pytestconfig.getini("krm_crds")
    if not given:
        return None
    folder = Path(given)
    return folder if folder.is_absolute() else pytestconfig.rootpath / folder


def manifests(folder: Path) -> list[Path]:
    """The YAML files of ``folder`` in name order, each read once to find a malformed one before a cluster
    starts. Raises UsageError naming the folder or file, and the fix."""
    if not folder.is_dir():
        raise UsageError(f"The CRD folder {folder} does not exist.",
                         "Pass an existing folder with --krm-crds PATH, or set krm_crds in your pytest "
                         "configuration (relative to the rootdir).")
    files = sorted(p for p in folder.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
    if not files:
        raise UsageError(f"The CRD folder {folder} holds no .yaml file.",
                         "Put your CustomResourceDefinitions there as YAML files.")
    for path in files:
        try:
            docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
        except yaml.YAMLError as exc:
            raise UsageError(f"{path} is not valid YAML: {exc}".replace("\n", " "),
                             "Fix the file; 'kubectl apply --dry-run=client -f FILE' shows the same.") from exc
        for doc in docs:
            if not isinstance(doc, dict) or not doc.get("kind") or not doc.get("apiVersion"):
                raise UsageError(f"{path} holds a document that is not a Kubernetes object (it needs "
                                 "apiVersion and kind).", "Fix or remove that document.")
    return files


def _crd_names(files: list[Path]) -> list[str]:
    return [d["metadata"]["name"] for f in files for d in yaml.safe_load_all(f.read_text())
            if isinstance(d, dict) and d.get("kind") == "CustomResourceDefinition"]


@pytest.fixture(scope="session")
def krm_cluster(krm_crds: Path | None) -> Iterator[Lab]:
    """A cluster for the whole session, its CRDs established; taken down at the end of the session."""
    try:
        files = manifests(krm_crds) if krm_crds is not None else []
    except KrmcourseError as exc:
        _fail(exc)
    lab = Lab(LAB, instance=f"pytest-{os.getpid()}", say=lambda _m: None)
    try:
        lab.up()
        for path in files:
            lab.apply(path)
        for name in _crd_names(files):
            lab.wait_for(f"crd/{name}", "condition=Established", timeout=60)
        if not snapshots.enabled(lab) or snapshots.save(lab, BASELINE) is None:
            lab.down()
            _fail(f"The {lab.provider.name} provider cannot save a snapshot of the cluster, so tests could not "
                  "start clean.\n  -> Use KRMCOURSE_PROVIDER=kwok or kind (with snapshots on).")
    except KrmcourseError as exc:
        lab.down()
        _fail(exc)
    yield lab
    lab.down()


@pytest.fixture
def krm_lab(krm_cluster: Lab, request: pytest.FixtureRequest) -> Iterator[Lab]:
    """The session's cluster as it was once its CRDs were in. After the test, a process it left running
    is stopped, and the test errors, naming it (use ``krm_controller``, which stops its own)."""
    if not snapshots.restore(krm_cluster, BASELINE):
        _fail(f"The snapshot of the session's cluster {krm_cluster.cluster} could not be restored.\n"
              "  -> Run the session again; 'krmcourse doctor' shows what is wrong with the cluster.")
    yield krm_cluster
    ours = {p.name for p in request.node.stash.get(_STARTED, [])}
    left = sorted(set(krm_cluster.running()) - ours)
    for name in left:
        krm_cluster.stop(name)
    if left:
        _fail(f"The test left {', '.join(left)} running; stopped now.\n"
              "  -> Start controllers with the krm_controller fixture, which stops them when the test ends.")


@pytest.fixture
def krm_api(krm_lab: Lab) -> Any:
    """A kr8s client bound to the session's cluster."""
    return krm_lab.api


@pytest.fixture
def krm_controller(krm_lab: Lab, request: pytest.FixtureRequest) -> Iterator[Callable[..., ManagedProcess]]:
    """``krm_controller(PROGRAM, *args, ready=TEXT, kopf=None, namespace=None)`` runs a controller beside the
    cluster with its KUBECONFIG, until the test ends. A relative PROGRAM is found from the test's folder,
    then from the rootdir. ``kopf`` (by default: the program imports kopf) runs it with ``kopf run
    --standalone``; ``ready`` waits for that text in its log."""
    started = request.node.stash.setdefault(_STARTED, [])

    def run(program: str | Path, *args: str, ready: str | None = None, kopf: bool | None = None,
            namespace: str | None = None, name: str | None = None, timeout: float = 60) -> ManagedProcess:
        path = _program(Path(program), request)
        as_kopf = kopf if kopf is not None else "import kopf" in path.read_text()
        if as_kopf:
            proc = krm_lab.run_kopf(path, namespace=namespace, name=name)
        else:
            proc = krm_lab.run_controller(path, *args, name=name)
        started.append(proc)
        if ready:
            try:
                proc.wait_for_log(ready, timeout=timeout)
            except (RuntimeError, TimeoutError) as exc:
                _fail(f"Controller {proc.name} did not log {ready!r}: {exc}")
        return proc

    yield run
    for proc in started:
        proc.stop()


def _program(program: Path, request: pytest.FixtureRequest) -> Path:
    for base in ([] if program.is_absolute() else [request.path.parent, request.config.rootpath]):
        if (base / program).is_file():
            return (base / program).resolve()
    if program.is_absolute() and program.is_file():
        return program
    _fail(f"The controller program {program} does not exist (looked beside the test and in the rootdir).\n"
          "  -> Pass a path to an existing Python file.")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item,
                              call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failed test's report carries the log of each controller it ran."""
    report = yield
    if report.failed and call.when == "call":
        for proc in item.stash.get(_STARTED, []):
            report.sections.append((f"controller {proc.name} log", proc.logs()[-6000:] or "(nothing)"))
    return report

