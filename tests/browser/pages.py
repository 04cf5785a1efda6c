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


#: A notebook is ready once its kernel has started and is idle. The status indicator alone says
#: "idle" before any kernel exists (the toolbar then names "No Kernel"), so both are read.
_READY_JS = """
() => {
  const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
  const name = panel && panel.querySelector('.jp-Toolbar-kernelName');
  const indicator = panel && panel.querySelector('.jp-Notebook-ExecutionIndicator');
  const kernel = name ? name.textContent.trim() : '';
  return kernel !== '' && kernel !== 'No Kernel' && indicator !== null && indicator.dataset.status === 'idle'
    && panel.querySelector('.jp-Notebook .jp-Cell') !== null;
}
"""


def open_notebook(page: Page, server: Server, name: str) -> None:
    """Open a notebook, and wait until its kernel has started and is idle."""
    open_lab(page, server, f"lab/tree/{name}")
    page.wait_for_function(_READY_JS, timeout=ACTION_MS, polling=200)


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
