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


def open_notebook(page: Page, server: Server, name: str) -> None:
    """Open a notebook, and wait until its kernel has started and is idle."""
    open_lab(page, server, f"lab/tree/{name}")
    notebook(page).locator('.jp-Notebook-ExecutionIndicator[data-status="idle"]').wait_for(
        state="attached", timeout=ACTION_MS)


def run_all_cells(page: Page) -> None:
    """Run → Run All Cells, from the menu bar, as a learner does (it runs the notebook last opened)."""
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()


#: The state of the open notebook: each code cell's prompt, and the kernel's status.
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
#: Done: the kernel is idle, nothing is queued or running, and something ran. ("Run All" marks every
#: cell [*] at once; when a cell fails, the kernel drops the rest and their prompts go back to [ ].)
_DONE_JS = f"""
() => {{
  const state = ({_STATE_JS})();
  return state !== null && state.kernel === 'idle' && state.prompts.length > 0
    && !state.prompts.some(p => p.includes('*')) && state.prompts.some(p => /\\d/.test(p));
}}
"""


def state(page: Page) -> dict[str, Any]:
    return page.evaluate(_STATE_JS)


def wait_until_run(page: Page, timeout_ms: int) -> list[str]:
    """Wait until the notebook has finished running; return its code cells' prompts."""
    page.wait_for_function(_DONE_JS, timeout=timeout_ms, polling=500)
    return state(page)["prompts"]


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
    found = page.wait_for_function(
        """([index, selector, shows, hides]) => {
          const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
          const cell = panel && panel.querySelectorAll('.jp-Notebook .jp-Cell')[index];
          for (const node of cell ? cell.querySelectorAll(selector) : []) {
            const text = node.textContent;
            if (shows.every(s => text.includes(s)) && !hides.some(s => text.includes(s))) return text;
          }
          return false;
        }""",
        arg=[index, selector, list(shows), list(hides)], timeout=timeout_ms, polling=200)
    return str(found.json_value())
