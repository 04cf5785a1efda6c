"""Chromium, driven through Playwright, and what a learner does and sees in JupyterLab.

Everything is read from the page, as rendered: the file browser's entries, a cell's prompt (``[ ]:``
before it runs, ``[*]:`` while it is queued or running, ``[3]:`` after), and the text of its outputs.
JupyterLab 4 renders an error exactly as it renders text written to stderr: both are a
``.jp-RenderedText`` with ``data-mime-type="application/vnd.jupyter.stderr"`` (the error's own
``application/vnd.jupyter.error`` data has no renderer of its own), so "no stderr output" covers both.
Text is read with ``textContent``, which does not depend on whether JupyterLab has laid out a cell
that is scrolled out of view.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Locator, Page, Playwright

from .servers import Server

#: Debian's Chromium; Playwright cannot download a browser of its own here.
DEFAULT_CHROMIUM = "/usr/bin/chromium"
#: Headless, and quiet on the network: without the last four, Chromium's own background connections
#: are refused on a machine with a closed network, and it slows down waiting for them.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
STDERR = "application/vnd.jupyter.stderr"
#: JupyterLab's question about news, in the notice the course turns off.
NEWS = re.compile(r"Jupyter news", re.IGNORECASE)
#: Generous: a lab cluster on a busy two-core machine takes its time. Only a hang should hit these.
ACTION_MS = 180_000


def chromium_path() -> str:
    """Where Chromium is: ``KRMCOURSE_CHROMIUM``, else Debian's. Fails with the fix when it is missing."""
    path = os.environ.get("KRMCOURSE_CHROMIUM") or DEFAULT_CHROMIUM
    if not (Path(path).is_file() or shutil.which(path)):
        pytest.fail(f"no Chromium at {path}: install Debian's package ('apt-get install chromium'; "
                    ".ci/system-packages does it), or set KRMCOURSE_CHROMIUM to a Chromium or Chrome binary",
                    pytrace=False)
    return path


def start_playwright() -> Playwright:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("Playwright is not installed: run './course test' (it installs the test extra), or "
                    "pip install -e '.[test]'", pytrace=False)
    return sync_playwright().start()


def launch(playwright: Playwright, folder: Path) -> Browser:
    """Chromium with a home and profile of its own in ``folder`` (it writes crash-report settings and a
    dconf file under the home folder even with a temporary profile)."""
    home = folder / "chromium-home"
    env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
           "XDG_CACHE_HOME": str(home / ".cache")}
    return playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS, env=env)


# ----------------------------------------------------------------- JupyterLab as a whole
def open_lab(page: Page, server: Server, path: str = "lab") -> None:
    """Open JupyterLab with the token, as from the printed link, and wait until its layout is restored
    (the splash screen goes away then) and the file browser lists something."""
    page.goto(server.url(path))
    page.wait_for_selector("#jupyterlab-splash", state="detached", timeout=ACTION_MS)
    page.locator(".jp-DirListing-item").first.wait_for(timeout=ACTION_MS)


def listed_files(page: Page) -> list[str]:
    return [t.strip() for t in page.locator(".jp-DirListing-item .jp-DirListing-itemText").all_text_contents()]


def news_notices(page: Page) -> list[str]:
    """The notifications on screen that are about Jupyter news (toasts stay until answered)."""
    return [t for t in page.locator(".jp-toast-message").all_text_contents() if NEWS.search(t)]


# ----------------------------------------------------------------- one notebook
def notebook(page: Page) -> Locator:
    return page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")


#: Where opening a notebook stands, read from the page: "ready" once its kernel has started and is
#: idle (the status indicator alone says "idle" before any kernel exists, when the toolbar names
#: "No Kernel", so both are read); "behind" when its tab is open but another one (JupyterLab's
#: Launcher, which it adds while the main area is still empty) is in front; "dialog" when a dialog
#: is open, which nothing in a fresh course JupyterLab should show; "dead" when its kernel died;
#: false while it is still on its way.
_OPENING_JS = """
(name) => {
  const tab = Array.from(document.querySelectorAll('#jp-main-dock-panel .lm-TabBar-tab'))
    .find(t => (t.querySelector('.lm-TabBar-tabLabel') || {}).textContent === name);
  const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
  const nameNode = panel && panel.querySelector('.jp-Toolbar-kernelName');
  const indicator = panel && panel.querySelector('.jp-Notebook-ExecutionIndicator');
  const kernel = nameNode ? nameNode.textContent.trim() : '';
  const status = indicator ? indicator.dataset.status : null;
  if (document.querySelector('.jp-Dialog')) return 'dialog';
  if (tab && !tab.classList.contains('lm-mod-current')) return 'behind';
  if (panel && status === 'dead') return 'dead';
  return tab !== undefined && kernel !== '' && kernel !== 'No Kernel' && status === 'idle'
    && panel.querySelector('.jp-Notebook .jp-Cell') !== null ? 'ready' : false;
}
"""

#: What the page shows, for a failure message: the main area's tabs (the current one marked "*"),
#: every notebook panel's kernel and status, open dialogs and notifications, and the status bar.
_SHOWN_JS = """
() => {
  const text = (node, n = 400) => node ? node.textContent.replace(/\\s+/g, ' ').trim().slice(0, n) : null;
  return {
    splash: document.querySelector('#jupyterlab-splash') !== null,
    tabs: Array.from(document.querySelectorAll('#jp-main-dock-panel .lm-TabBar-tab'),
      t => (t.classList.contains('lm-mod-current') ? '*' : '') + text(t.querySelector('.lm-TabBar-tabLabel'))),
    notebooks: Array.from(document.querySelectorAll('.jp-NotebookPanel'), p => ({
      hidden: p.classList.contains('lm-mod-hidden'),
      kernel: text(p.querySelector('.jp-Toolbar-kernelName')),
      status: (p.querySelector('.jp-Notebook-ExecutionIndicator') || {dataset: {}}).dataset.status || null,
      cells: p.querySelectorAll('.jp-Notebook .jp-Cell').length,
      toolbarOverflow: p.querySelector('.jp-Toolbar-responsive-opener:not(.lm-mod-hidden)') !== null})),
    dialogs: Array.from(document.querySelectorAll('.jp-Dialog'), d => text(d, 1000)),
    notifications: Array.from(document.querySelectorAll('.jp-toast-message'), t => text(t)),
    statusBar: text(document.querySelector('#jp-main-statusbar')),
  };
}
"""


def shown(page: Page) -> Any:
    """What the page shows (see ``_SHOWN_JS``), or why it could not be read."""
    try:
        return page.evaluate(_SHOWN_JS)
    except Exception as error:  # noqa: BLE001 - a failure message must not fail itself
        return f"(the page could not be read: {error})"


def open_notebook(page: Page, server: Server, name: str) -> None:
    """Open a notebook from its address, as a link to it does, and wait until its kernel has started and
    is idle (see :func:`wait_until_open`)."""
    console: list[str] = []
    page.on("console", lambda m: console.append(f"{m.type}: {m.text[:300]}") if m.type in ("error", "warning")
            else None)
    open_lab(page, server, f"lab/tree/{name}")
    wait_until_open(page, server, name, time.monotonic(), console)


#: What Chromium logs for a request it dropped because the machine's network interfaces changed.
NETWORK_CHANGED = "net::ERR_NETWORK_CHANGED"


def wait_until_open(page: Page, server: Server, name: str, started: float, console: Sequence[str] = ()) -> None:
    """Wait until the notebook ``name`` is in front with its kernel started and idle, at most
    ``ACTION_MS`` after ``started`` (a ``time.monotonic()``). If its tab ends up behind another one,
    bring it to the front, as a learner would; if a dialog follows requests that Chromium dropped for a
    network change (``console`` holds the page's console errors), reload the page, as a learner would.
    Any other dialog, or a dead kernel, fails at once, saying what the page and the server show."""
    label, brought_forward, reloads = Path(name).name, 0, 0  # the tab shows the file's name only
    since_reload = len(console)
    while (left_ms := ACTION_MS - (time.monotonic() - started) * 1000) > 0:
        try:
            found = page.wait_for_function(_OPENING_JS, arg=label, timeout=left_ms, polling=200).json_value()
        except _timeout_error():
            break
        if found == "ready":
            return
        if found == "behind" and brought_forward < 3:
            brought_forward += 1
            page.locator("#jp-main-dock-panel .lm-TabBar-tab", has=page.locator(
                ".lm-TabBar-tabLabel", has_text=re.compile(f"^{re.escape(label)}$"))).click()
            continue
        if found == "dialog" and reloads < 3 and any(NETWORK_CHANGED in m for m in console[since_reload:]):
            # Chromium drops the requests under way when the machine's interfaces change, as Docker's do
            # when a kind node starts or goes; JupyterLab then shows "File Load Error ... Failed to fetch".
            # A learner reloads the page; so does the test.
            reloads += 1
            since_reload = len(console)
            page.reload()
            page.wait_for_selector("#jupyterlab-splash", state="detached", timeout=ACTION_MS)
            continue
        break
    _fail_opening(page, server, name, started, console)


def _fail_opening(page: Page, server: Server, name: str, started: float, console: Sequence[str]) -> None:
    screenshot = str(server.log.with_name(f"open-{Path(name).stem}-failed.png"))
    try:
        page.screenshot(path=screenshot)
    except Exception as error:  # noqa: BLE001
        screenshot = f"(no screenshot: {error})"
    sessions: list[Any]
    try:
        sessions = [{"path": s["path"], **{k: s["kernel"].get(k) for k in ("name", "execution_state", "connections")}}
                    for s in server.get("api/sessions")[1] or []]
    except Exception as error:  # noqa: BLE001
        sessions = [f"(could not ask: {error})"]
    pytest.fail(f"{name} was not open with an idle kernel {time.monotonic() - started:.0f} s after JupyterLab had "
                f"loaded.\nThe page shows: {shown(page)}\nJupyterLab's sessions: {sessions}\n"
                f"The page's console errors and warnings (last 20): {list(console)[-20:]}\nScreenshot: {screenshot}\n"
                f"JupyterLab's log ends:\n{server.log_tail()}", pytrace=False)


def run_all_cells(page: Page) -> None:
    """Run → Run All Cells, from the menu bar, as a learner does (it runs the notebook last opened)."""
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()


#: The state of the open notebook: each code cell's prompt ('' for a cell whose input is hidden: its
#: placeholder shows no prompt), and the kernel's status.
_STATE_JS = """
() => {
  const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
  if (!panel) return null;
  const prompts = Array.from(panel.querySelectorAll('.jp-Notebook .jp-CodeCell'), cell => {
    const prompt = cell.querySelector('.jp-InputArea-prompt');
    return prompt ? prompt.textContent.trim() : '';
  });
  const indicator = panel.querySelector('.jp-Notebook-ExecutionIndicator');
  return {prompts, kernel: indicator ? indicator.dataset.status : null};
}
"""
#: Done: every code cell is on the page (JupyterLab attaches them a few at a time), the kernel is idle,
#: nothing is queued or running, and something ran. "Run All" marks every visible cell [*] at once;
#: when a cell fails, the kernel drops the rest and their prompts go back to [ ].
_DONE_JS = f"""
(cells) => {{
  const state = ({_STATE_JS})();
  return state !== null && state.prompts.length === cells && state.kernel === 'idle'
    && !state.prompts.some(p => p.includes('*')) && state.prompts.some(p => /\\d/.test(p));
}}
"""


def run_whole_notebook(page: Page, server: Server, name: str, hidden: Sequence[bool], timeout_ms: int) -> None:
    """Open a notebook, Run All Cells, and wait for the end; fail if any output is an error or stderr, or
    if the cells did not all run once, in order. ``hidden`` says which code cells hide their input
    (:func:`browser.notebooks.hidden_inputs`)."""
    open_notebook(page, server, name)
    run_all_cells(page)
    prompts = wait_until_run(page, len(hidden), timeout_ms)
    stderr = notebook_outputs(page, STDERR)
    assert not stderr, "outputs rendered as errors or stderr (red):\n" + "\n---\n".join(s[-1500:] for s in stderr)
    assert not (problem := not_run_in_order(prompts, hidden)), problem


def state(page: Page) -> dict[str, Any]:
    return page.evaluate(_STATE_JS)


def wait_until_run(page: Page, code_cells: int, timeout_ms: int) -> list[str]:
    """Wait until the notebook, which has ``code_cells`` code cells, has finished running; return their
    prompts. A hidden cell shows no prompt, so the last code cell must be visible: only its prompt
    says the run has reached the end (every course notebook ends with a visible ``lab.down()``)."""
    try:
        page.wait_for_function(_DONE_JS, arg=code_cells, timeout=timeout_ms, polling=500)
    except _timeout_error() as error:
        now = state(page) or {}
        pytest.fail(f"the notebook did not finish running within {timeout_ms / 1000:.0f} s: kernel "
                    f"{now.get('kernel')}, prompts {now.get('prompts')}, errors and stderr so far: "
                    f"{[t[-500:] for t in notebook_outputs(page, STDERR)]}; the JupyterLab log may say why "
                    f"({error.__class__.__name__})", pytrace=False)
    return state(page)["prompts"]


def not_run_in_order(prompts: Sequence[str], hidden: Sequence[bool]) -> str | None:
    """Why these prompts do not show one run of every cell, in order; None when they do.

    Hidden cells show no count, but they take one: with counts 7 and 9 around a hidden cell, it ran
    as 8. So every visible cell must show a count, and the counts must be consecutive, gaps included.
    """
    if len(prompts) != len(hidden):
        return f"{len(prompts)} code cells on the page, {len(hidden)} in the notebook"
    counts = [(i, p[1:-2]) for i, (p, h) in enumerate(zip(prompts, hidden, strict=True)) if not h]
    missing = [i for i, count in counts if not count.isdigit()]
    if missing:
        return f"code cells {missing} did not run: {list(prompts)}"
    offsets = {int(count) - i for i, count in counts}
    return None if len(offsets) == 1 else f"the cells did not run once each, in order: {list(prompts)}"


def cell(page: Page, index: int) -> Locator:
    """The ``index``-th cell (markdown cells count too), in notebook order."""
    return notebook(page).locator(".jp-Notebook .jp-Cell").nth(index)


def prompt(page: Page, index: int) -> str:
    return (cell(page, index).locator(".jp-InputArea-prompt").text_content() or "").strip()


def notebook_outputs(page: Page, mime: str | None = None) -> list[str]:
    """The text of every output of the open notebook, or of those rendered as ``mime``."""
    return _texts(notebook(page), mime)


def cell_outputs(page: Page, index: int, mime: str | None = None) -> list[str]:
    """The text of every output of one cell, or of those rendered as ``mime``."""
    return _texts(cell(page, index), mime)


def _texts(scope: Locator, mime: str | None) -> list[str]:
    selector = ".jp-OutputArea-output" + (f'[data-mime-type="{mime}"]' if mime else "")
    return [t or "" for t in scope.locator(selector).all_text_contents()]


def wait_for_text(page: Page, index: int, selector: str, shows: Sequence[str], hides: Sequence[str] = (),
                  timeout_ms: int = ACTION_MS) -> str:
    """Wait until an output element of a cell shows every string of ``shows`` and none of ``hides``;
    return its text."""
    script = """([index, selector, shows, hides]) => {
          const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
          const cell = panel && panel.querySelectorAll('.jp-Notebook .jp-Cell')[index];
          for (const node of cell ? cell.querySelectorAll(selector) : []) {
            const text = node.textContent;
            if (shows.every(s => text.includes(s)) && !hides.some(s => text.includes(s))) return text;
          }
          return false;
        }"""
    try:
        found = page.wait_for_function(script, arg=[index, selector, list(shows), list(hides)], timeout=timeout_ms,
                                       polling=200)
    except _timeout_error():
        texts = [t or "" for t in cell(page, index).locator(selector).all_text_contents()]
        pytest.fail(f"cell {index}: no {selector!r} showed {list(shows)} without {list(hides)} within "
                    f"{timeout_ms / 1000:.0f} s; the page shows {texts or 'no such element'} (prompt "
                    f"{prompt(page, index)!r}, outputs {cell_outputs(page, index)}; the notebook's prompts "
                    f"{(state(page) or {}).get('prompts')}, errors and stderr "
                    f"{[t[-800:] for t in notebook_outputs(page, STDERR)]})", pytrace=False)
    return str(found.json_value())


def _timeout_error() -> type[Exception]:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    return PlaywrightTimeout
