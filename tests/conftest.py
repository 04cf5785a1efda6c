"""Shared test set-up: an isolated krmcourse state folder, and helpers for cluster tests.

Every test run keeps its clusters in a fresh state folder (KRMCOURSE_HOME), so it never touches a
learner's running labs; the toolchain cache is shared, because building it is the slow part. Notebook
kernels started by nbval inherit the same environment.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import testhome

if TYPE_CHECKING:
    from playwright.sync_api import Browser

# Each test process (and each pytest-xdist worker) gets its own state folder, so clusters of the same
# lab started by a notebook and by a test in parallel never meet. Set KRMCOURSE_HOME to opt out.
_OWN_HOME = "KRMCOURSE_HOME" not in os.environ or "_KRMCOURSE_TEST_HOME" in os.environ
# A run stopped by a signal leaves its folder behind: the next run takes it down (testhome).
if _OWN_HOME:
    os.environ["KRMCOURSE_HOME"] = str(testhome.make(os.environ.get("PYTEST_XDIST_WORKER", "main")))
    os.environ["_KRMCOURSE_TEST_HOME"] = "1"

# Notebooks run to their end here: their solution cells apply the reference solutions, which a
# learner's "Run All" does not (see Lab.show_solution). The notebook kernels inherit this.
os.environ.setdefault("KRMCOURSE_SOLUTIONS", "apply")

ROOT = Path(__file__).resolve().parent.parent


def run_provider() -> str:
    """The provider this run's clusters come from: KRMCOURSE_PROVIDER, else the default."""
    return os.environ.get("KRMCOURSE_PROVIDER") or "kwok"


def _needs_cluster(item: pytest.Item) -> bool:
    return "cluster" in item.keywords or item.path.suffix == ".ipynb"


_PROBLEM: list[str | None] = []


def provider_problem() -> str | None:
    """Why this run's provider cannot start clusters, or None. Asked once per test process."""
    if not _PROBLEM:
        from krmcourse import toolchain
        from krmcourse.providers import select

        name = run_provider()
        problem = select(name).usable()
        if problem is None and name in ("kwok", "kind") and not toolchain.is_installed(name):
            problem = f"the {name} toolchain is not built ({', '.join(toolchain.missing(name)) or 'node image'})"
        _PROBLEM.append(problem and f"{problem} -> run 'krmcourse toolchain install --provider {name}' "
                                    "(./course test does it for you)")
    return _PROBLEM[0]


#: Files whose tests share nothing (each starts a cluster of its own) and which take longest: their tests go
#: one by one to whichever worker is free, rather than all to one worker that the whole run then waits for.
SPREAD = frozenset({"tests/test_faults.py", "tests/test_exercises.py"})


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """--dist loadfile, except for the files in :data:`SPREAD`."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class LoadFileExceptSpread(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            file = super()._split_scope(nodeid)
            return nodeid if file in SPREAD else file

    return LoadFileExceptSpread(config, log)


def image_tests_asked(config: pytest.Config) -> bool:
    """The image tests need root and Docker's engine: they run when the run asks for them, and then fail,
    never skip, where the engine is stopped."""
    return os.environ.get("KRMCOURSE_IMAGE_TESTS") == "1" or "image" in (config.getoption("markexpr") or "")


class _EveryNotebookOnEveryProvider:
    """A learner runs every notebook on whichever provider they have: each is marked every_provider before -m
    deselects, so that '-m every_provider' (CI's kind phase) selects it. (A plugin of its own, since this
    conftest's hook below runs after -m, and item hooks here see only the items under tests/.)"""

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            if item.path.suffix == ".ipynb":
                item.add_marker(pytest.mark.every_provider)


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_EveryNotebookOnEveryProvider(), "krmcourse-notebook-marks")


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected what they will
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _part_v_at_half_a_core(items)
    # The longest single test goes first, so that no worker starts it when the others are nearly done: the
    # scheduler hands out files in this order.
    items.sort(key=lambda item: item.nodeid != HALF_CORE_TEST)
    # Tests of one provider's own machinery run when the run uses that provider: a kwok run says so
    # rather than failing for want of Docker, and a kind run never skips them.
    for item in items:
        if (marker := item.get_closest_marker("registry")) and os.environ.get("KRMCOURSE_REGISTRY_TESTS") != "1":
            item.add_marker(pytest.mark.skip(reason=f"{marker.kwargs.get('reason', 'asks a package registry')}: "
                                                    "KRMCOURSE_REGISTRY_TESTS=1 runs it (CI does, while the "
                                                    "registries are reachable)"))
        if item.get_closest_marker("image") and not image_tests_asked(config):
            item.add_marker(pytest.mark.skip(reason="builds and runs the user image with Docker: "
                                                    "KRMCOURSE_IMAGE_TESTS=1 or '-m image' runs it (CI does)"))
        for name in ("kind", "kwok"):
            if name in item.keywords and run_provider() != name:
                item.add_marker(pytest.mark.skip(reason=f"tests the {name} provider, and this run uses "
                                                        f"{run_provider()}: KRMCOURSE_PROVIDER={name} runs it"))


HALF_CORE_TEST = "tests/test_half_core.py::test_part_v_notebooks_pass_with_their_lab_held_to_half_a_core"


def _part_v_at_half_a_core(items: list[pytest.Item]) -> None:
    """Part V's notebooks run once: inside tests/test_half_core.py, held to half a core, when that test is
    selected and can run here (kwok, root, a CPU cgroup); otherwise as every other notebook runs."""
    import halfcore
    import test_half_core

    if (run_provider() != "kwok" or halfcore.problem()
            or not any(item.nodeid == HALF_CORE_TEST for item in items)):
        return
    prefixes = test_half_core.part_v_nodeid_prefixes()
    for item in items:
        if item.nodeid.startswith(prefixes):
            item.add_marker(pytest.mark.skip(reason=f"runs held to half a core, in {HALF_CORE_TEST}"))


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A run whose provider cannot work fails every test that needs a cluster, with the reason."""
    if _needs_cluster(item) and (problem := provider_problem()):
        pytest.fail(f"the {run_provider()} provider cannot start clusters here: {problem}", pytrace=False)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    """A failed test shows the end of each controller log it started or adopted: what the controller saw.

    A process that has exited is shown too, and says so: a controller that died is often the reason."""
    outcome = yield
    report = outcome.get_result()
    if report.failed and call.when == "call":
        from krmcourse import processes

        shown: set[Path] = set()
        for proc in processes.seen():
            if proc.log_path in shown or not proc.log_path.exists():  # no log: its lab was taken down
                continue
            shown.add(proc.log_path)
            state = "running" if proc.alive else "exited"
            report.sections.append((f"log of {proc.name}, {state} (last 4000 characters)", proc.logs()[-4000:]))


@pytest.fixture(scope="module")
def chromium(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    """Debian's Chromium, through Playwright, for the tests of one file (tests/browser/pages.py)."""
    from browser import pages

    playwright = pages.start_playwright()
    try:
        browser = pages.launch(playwright, tmp_path_factory.mktemp("chromium"))
        yield browser
        browser.close()
    finally:
        playwright.stop()


def pytest_sessionstart(session: pytest.Session) -> None:
    """Take down what earlier test runs, stopped by a signal, left running, and say so."""
    if hasattr(session.config, "workerinput"):  # a run's first process does it, once
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    for home in testhome.abandoned():
        deleted = testhome.take_down(home)
        said = f"krmcourse: removed {home}, which a stopped test run left behind"
        said += f", and took down its clusters {', '.join(deleted)}" if deleted else ""
        if reporter:
            reporter.write_line(said)
        else:
            print(said)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Take down any cluster a failed test left behind, and remove the run's state folder."""
    if _OWN_HOME:
        from krmcourse.paths import state_dir

        testhome.take_down(state_dir())


@pytest.fixture(scope="session")
def sandbox() -> Iterator:
    """One running sandbox cluster shared by the tests that only read or add objects."""
    from krmcourse import Lab

    lab = Lab("sandbox", instance="shared").up()
    yield lab
    lab.down()


@pytest.fixture
def without_kubectl(monkeypatch: pytest.MonkeyPatch) -> Callable[[], AbstractContextManager[None]]:
    """``with without_kubectl(): ...`` fails the test if the block runs kubectl: for code that must read
    over the lab's one HTTPS connection, with no process per read."""
    from krmcourse import kubectl

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"ran kubectl {args[1] if len(args) > 1 else args}, where no process was wanted")

    @contextmanager
    def forbidden() -> Iterator[None]:
        with monkeypatch.context() as patch:
            patch.setattr(kubectl, "run", refuse)
            yield

    return forbidden


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A loopback port that something else is listening on, for as long as the test runs."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


@pytest.fixture(scope="module")
def lab(request: pytest.FixtureRequest) -> Iterator:
    """The test module's own lab, up for the whole module and down after it.

    The module names it: ``LAB_NAME = "governor"``, and ``LAB_INSTANCE`` when it must not share the
    default instance ``tests`` with another module. A module that needs more set-up defines its own."""
    from krmcourse import Lab

    name = getattr(request.module, "LAB_NAME", None)
    if name is None:
        raise pytest.UsageError(f"{request.module.__name__} uses the lab fixture but sets no LAB_NAME")
    lab = Lab(name, instance=getattr(request.module, "LAB_INSTANCE", "tests")).up()
    yield lab
    lab.down()


@pytest.fixture
def namespace(sandbox, request: pytest.FixtureRequest) -> Iterator[str]:
    """A namespace per test in the shared sandbox, deleted afterwards."""
    name = "t-" + request.node.name.lower().replace("_", "-")[:50].strip("-")
    sandbox.kubectl("create", "namespace", name)
    yield name
    sandbox.kubectl("delete", "namespace", name, "--wait=false")
