"""What a learner actually sees: JupyterLab, driven in Chromium, on the course's notebooks and labs.

The other tests check the package and run the notebooks in a bare kernel (nbval); these start
JupyterLab as ``./course start`` does, open it in a real browser and read the page: the file browser,
the prompts and outputs of cells run through "Run All Cells", the widgets as they are drawn, and the
notifications. All tests of this file run on one pytest-xdist worker, one after the other (the run
uses --dist loadfile), so that a single Chromium and at most two JupyterLabs share the machine with
the other workers. See tests/README.md, "Browser tests".
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

import pytest
from browser import notebooks as nbs
from browser import pages
from browser.servers import (
    ROOT,
    Server,
    course_install_is_current,
    existing,
    isolated_env,
    new_paths,
    plain_lab_command,
    start,
    stop,
)

from krmcourse import CheckFailed, Lab
from krmcourse.jupyter import install_settings, lab_command

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = pytest.mark.browser

#: Running a whole notebook on a busy two-core machine: the timeout only guards against a hang.
RUN_MS = 1_500_000
#: Course notebooks run through "Run All Cells", with the labs each one starts.
NOTEBOOKS = {"00-welcome.ipynb": ["welcome"], "03-controllers.ipynb": ["controllers"]}
#: What only these tests would create in the real home folder, if their isolation failed.
HOME = Path.home()
WATCHED_IN_HOME = [HOME / ".jupyter" / "lab", HOME / ".config" / "chromium", HOME / ".cache" / "dconf"]
#: What a traceback looks like in IPython 9, and a learner should not have to read.
TRACEBACK_MARKS = ("Traceback", "File \"", "Cell In[", "---->", "krmcourse/", "site-packages")


# ----------------------------------------------------------------- fixtures
@pytest.fixture(scope="module", autouse=True)
def home_left_clean() -> Iterator[None]:
    """Nothing of JupyterLab's or Chromium's ends up in the learner's home folder."""
    before = existing(WATCHED_IN_HOME)
    yield
    left = new_paths(before, WATCHED_IN_HOME)
    assert not left, f"the browser tests wrote into the home folder: {left}; isolate them (see isolated_env)"


def _local(url: str) -> bool:
    parsed = urlparse(url)
    return parsed.scheme in ("data", "blob", "about") or parsed.hostname == "127.0.0.1"


@pytest.fixture
def open_page(chromium: Browser) -> Iterator[Callable[[], Page]]:
    """Fresh pages, each in a browser context of its own. The test fails if a page asked for anything
    but 127.0.0.1: the course has to work offline, and JupyterLab must not phone home for it."""
    contexts, outside = [], []

    def new_page() -> Page:
        context = chromium.new_context(viewport={"width": 1400, "height": 1000})
        context.set_default_timeout(pages.ACTION_MS)
        context.on("request", lambda request: None if _local(request.url) else outside.append(request.url))
        contexts.append(context)
        return context.new_page()

    yield new_page
    for context in contexts:
        context.close()
    assert not outside, f"the page asked for addresses outside 127.0.0.1: {outside[:5]}"


@pytest.fixture(scope="module")
def lab_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """JupyterLab's folder: copies of the course notebooks (running them must not write outputs into
    the repository's, which are kept clean), and the notebooks the tests generate."""
    root = tmp_path_factory.mktemp("notebooks")
    for name in NOTEBOOKS:
        shutil.copy(ROOT / "notebooks" / name, root / name)
    return root


@pytest.fixture(scope="module")
def jupyterlab(lab_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One JupyterLab for the notebook tests, with the command line and settings of ``krmcourse start``."""
    install_settings()
    folder = tmp_path_factory.mktemp("jupyterlab")
    server = start(lab_command(lab_root, port=0, open_browser=False), isolated_env(folder), folder / "jupyterlab.log")
    yield server
    leftovers = stop(server)
    assert not leftovers, f"JupyterLab left processes running after SIGTERM: {leftovers}"


@pytest.fixture
def lab_server(jupyterlab: Server) -> Iterator[Server]:
    """The shared JupyterLab, with every kernel a test started shut down after it (as closing the
    notebook and choosing "Shut Down Kernel" would)."""
    yield jupyterlab
    jupyterlab.shutdown_kernels()


def take_down(*labs: Lab) -> None:
    """Take labs down, whatever state a failed test left them in, and check nothing is left."""
    for lab in labs:
        lab.down()
        assert not lab.status()["exists"], f"lab {lab.name}'s cluster is still there after down()"


def see(page: Page, index: int, selector: str, shows: Sequence[str], hides: Sequence[str], ack: Path) -> None:
    """Wait until the cell's widget shows one step, check the cell is still running, and tell it so."""
    pages.wait_for_text(page, index, selector, shows, hides)
    assert pages.prompt(page, index) == "[*]:", f"cell {index} had finished before the page showed {ack.name}"
    ack.touch()


# ----------------------------------------------------------------- ./course start
@pytest.mark.cluster
def test_course_start_serves_jupyterlab_on_localhost_with_a_token_and_the_welcome_lab_up(
        open_page: Callable[[], Page], tmp_path: Path) -> None:
    venv = Path(sys.prefix)
    if not course_install_is_current(venv):
        pytest.fail("./course would reinstall the course's packages before starting (the install is older than "
                    "the code), and a test must not reach a package registry: run './course test', which "
                    "reinstalls first, or './course start' once", pytrace=False)
    welcome = Lab("welcome")
    server = start([str(ROOT / "course"), "start", "--no-browser", "--port", "0"],
                   isolated_env(tmp_path, KRMCOURSE_VENV=str(venv)), tmp_path / "course-start.log", timeout=900)
    try:
        assert server.listening_addresses() == {"127.0.0.1"}, "JupyterLab must listen on 127.0.0.1 only"
        assert server.get("api/contents", token=False)[0] == 403, "JupyterLab answered without its token"
        page = open_page()
        pages.open_lab(page, server)
        page.locator(".jp-DirListing-itemText", has_text="00-welcome.ipynb").wait_for()
        assert "00-welcome.ipynb" in pages.listed_files(page)
        assert not pages.news_notices(page)
        status = welcome.status()
        assert status["ready"], f"the welcome lab is not up while JupyterLab serves: {status}"
    finally:
        leftovers = stop(server)
        take_down(welcome)
    assert not leftovers, f"./course start left processes running after SIGTERM: {leftovers}"
    assert server.process.returncode == 0, f"./course start exited {server.process.returncode}:\n{server.log_tail()}"


# ----------------------------------------------------------------- the news notice
def test_jupyter_news_notice_pops_up_in_a_plain_jupyterlab_but_not_in_the_courses(
        lab_server: Server, lab_root: Path, open_page: Callable[[], Page], tmp_path: Path) -> None:
    # First the notice itself, in a JupyterLab with no settings of the course: so this test knows what
    # it is looking for, and would see it.
    no_settings = tmp_path / "no-settings"
    no_settings.mkdir()
    plain = start(plain_lab_command(lab_root, no_settings), isolated_env(tmp_path), tmp_path / "plain.log")
    try:
        page = open_page()
        pages.open_lab(page, plain)
        page.locator(".jp-toast-message", has_text=pages.NEWS).wait_for()
    finally:
        leftovers = stop(plain)
    assert not leftovers, f"JupyterLab left processes running after SIGTERM: {leftovers}"

    status, setting = lab_server.get("lab/api/settings/@jupyterlab/apputils-extension:notification")
    default = setting["schema"]["properties"]["fetchNews"]["default"] if status == 200 else None
    assert default == "false", f"JupyterLab does not serve the course's setting: {status} {setting}"
    page = open_page()
    pages.open_notebook(page, lab_server, "00-welcome.ipynb")  # well after the point the notice would show
    assert not pages.news_notices(page)


# ----------------------------------------------------------------- course notebooks, Run All Cells
@pytest.mark.cluster
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("name", list(NOTEBOOKS))
def test_course_notebook_runs_through_run_all_cells_without_error_or_stderr(
        name: str, lab_server: Server, lab_root: Path, open_page: Callable[[], Page]) -> None:
    hidden = nbs.hidden_inputs(lab_root / name)
    assert not hidden[-1], f"{name}: the last code cell must be visible, or the end of a run cannot be seen"
    page = open_page()
    try:
        pages.run_whole_notebook(page, lab_server, name, hidden, RUN_MS)
        assert not pages.news_notices(page)
        if name == "03-controllers.ipynb":
            assert_controllers_widgets_drawn(page)
    finally:
        take_down(*(Lab(lab) for lab in NOTEBOOKS[name]))


def assert_controllers_widgets_drawn(page: Page) -> None:
    """Notebook 03 shows an ownership tree (an ipywidget) and two event timelines (HTML tables): each is
    drawn on the page, from the cluster, rather than left as a text repr or a "Loading widget" line."""
    trees = pages.notebook(page).locator(".widget-vbox .widget-html-content").all_text_contents()
    assert any("Greeting/hello" in t and "ConfigMap/greeting-hello" in t for t in trees), trees
    tables = pages.notebook(page).locator(".jp-OutputArea-output table").all_text_contents()
    assert sum("Greeting/" in t and "ADDED" in t for t in tables) >= 2, tables


# ----------------------------------------------------------------- the widgets, live
@pytest.mark.cluster
@pytest.mark.timeout(1800)
def test_ownership_tree_and_event_timeline_render_and_update_while_their_cell_runs(
        lab_server: Server, lab_root: Path, open_page: Callable[[], Page]) -> None:
    acks = lab_root / "acks"
    acks.mkdir(exist_ok=True)
    nbs.widgets_notebook(lab_root, acks)
    lab = Lab(nbs.WIDGET_LAB[0], instance=nbs.WIDGET_LAB[1])
    page = open_page()
    tree, table = ".widget-vbox .widget-html-content", ".jp-OutputArea-output table"
    try:
        pages.open_notebook(page, lab_server, "widgets.ipynb")
        pages.run_all_cells(page)
        root, leaf = "ConfigMap/root", "ConfigMap/leaf"
        see(page, nbs.TREE, tree, [root], [leaf], acks / "tree-root")
        see(page, nbs.TREE, tree, [root, leaf], [], acks / "tree-leaf-added")
        see(page, nbs.TREE, tree, [root], [leaf], acks / "tree-leaf-removed")
        first, second = "ConfigMap/timeline-first", "ConfigMap/timeline-second"
        see(page, nbs.TIMELINE, table, [first, "ADDED"], [second], acks / "timeline-first")
        see(page, nbs.TIMELINE, table, [second, "ADDED"], [first], acks / "timeline-second")
        prompts = pages.wait_until_run(page, 3, RUN_MS)
        assert not (problem := pages.not_run_in_order(prompts, [False] * 3)), problem
        assert not pages.notebook_outputs(page, pages.STDERR)

        # After the cell: the tree's Refresh button asks the kernel to read the cluster again.
        owner = lab.get("configmap", "root", namespace=nbs.NAMESPACE)
        lab.apply({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "late", "namespace": nbs.NAMESPACE, "ownerReferences": [
                       {"apiVersion": "v1", "kind": "ConfigMap", "name": "root", "uid": owner["metadata"]["uid"]}]}})
        pages.cell(page, nbs.TREE).get_by_role("button", name="Refresh").click()
        pages.wait_for_text(page, nbs.TREE, tree, [root, "ConfigMap/late"])
    finally:
        take_down(lab)


# ----------------------------------------------------------------- a failing exercise check
@pytest.mark.cluster
def test_a_failing_exercise_check_shows_its_hint_not_a_traceback(
        lab_server: Server, lab_root: Path, open_page: Callable[[], Page]) -> None:
    nbs.check_notebook(lab_root)
    lab_name, exercise = nbs.CHECKED
    lab = Lab(lab_name)
    page = open_page()
    try:
        pages.open_notebook(page, lab_server, "check.ipynb")
        pages.run_all_cells(page)
        prompts = pages.wait_until_run(page, 2, RUN_MS)
        shown = pages.cell_outputs(page, nbs.CHECK_CELL)
        with pytest.raises(CheckFailed) as failed:  # what the learner should read, asked of the same cluster
            lab.check(exercise)
    finally:
        take_down(lab)
    assert pages.not_run_in_order(prompts, [False, False]) is None, f"the check cell did not run: {prompts}"
    assert len(shown) == 1, f"the check cell shows {len(shown)} outputs: {shown}"
    text = shown[0].strip()
    assert failed.value.message in text and failed.value.hint in text, text
    assert not [m for m in TRACEBACK_MARKS if m in text], f"the learner is shown a traceback:\n{text}"
    wanted = len(str(failed.value).splitlines()) + 1
    assert len(text.splitlines()) <= wanted, f"more than the message and its hint:\n{text}"
    assert pages.cell_outputs(page, nbs.CHECK_CELL, pages.STDERR) == shown, "a failed check should still look failed"
