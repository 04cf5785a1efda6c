"""The course's own Jupyter settings, and JupyterLab as ``krmcourse start`` runs it.

The settings live in the Python environment the course is installed in, never in the learner's home
folder, so they reach the course's JupyterLab and kernels without touching the learner's own Jupyter:

- JupyterLab reads default overrides from ``overrides.d/`` in its application folder
  (``<prefix>/share/jupyter/lab/settings``). The course's file there turns off the "Would you like to
  get notified about official Jupyter news?" notice: it pops up over the first notebook, and the
  course is meant to work offline. A learner can still turn news on in Settings.
- Every IPython kernel of the environment reads ``<prefix>/etc/ipython``. The course adds itself there
  as an extension, so an exercise check that fails in a notebook shows its message and hint, which is
  what the learner needs, instead of a traceback through the check's own code.

This module is that extension too (:func:`load_ipython_extension`). JupyterLab itself runs as a child
of ``krmcourse start`` (:func:`run_lab`), bound to 127.0.0.1 and protected by the token it makes.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from .errors import CheckFailed, PortInUseError

Say = Callable[[str], None]

#: JupyterLab settings the course overrides: plugin id -> {setting: value}.
LAB_SETTINGS: dict[str, dict[str, Any]] = {
    "@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False},
}
#: This module, as IPython names an extension.
EXTENSION = "krmcourse.jupyter"


# ----------------------------------------------------------------- where the settings go
def lab_settings_file() -> Path:
    """The course's own file among JupyterLab's default overrides (``overrides.d`` takes one file per
    package, so a learner's ``overrides.json`` is neither read nor rewritten)."""
    from jupyterlab.commands import get_app_dir

    return Path(get_app_dir()) / "settings" / "overrides.d" / "krmcourse.json"


def kernel_config_file() -> Path:
    """The environment-wide configuration file every IPython kernel started from this Python reads."""
    return Path(sys.prefix) / "etc" / "ipython" / "ipython_kernel_config.json"


def with_course_extension(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with this module among the kernel's extra extensions. ``extra_extensions`` rather than
    ``extensions``, so that a list someone set elsewhere is added to, not replaced."""
    merged: dict[str, Any] = json.loads(json.dumps(config))
    extra = merged.setdefault("InteractiveShellApp", {}).setdefault("extra_extensions", [])
    if EXTENSION not in extra:
        extra.append(EXTENSION)
    return merged


def install_settings(say: Say = print) -> list[Path]:
    """Write the course's JupyterLab and kernel settings into the environment; return the files written.

    Idempotent: a file that already says the right thing is left alone. A file that cannot be written
    (a read-only environment) is reported, not fatal: the course works without it, only less smoothly.
    """
    written = []
    wanted = {lab_settings_file(): LAB_SETTINGS}
    kernel_file = kernel_config_file()
    try:
        current = json.loads(kernel_file.read_text()) if kernel_file.is_file() else {}
    except ValueError as exc:
        say(f"Left {kernel_file} alone: it is not valid JSON ({exc}). Fix it, and failed exercise checks will "
            "show their hint instead of a traceback.")
    else:
        wanted[kernel_file] = with_course_extension(current)
    for path, settings in wanted.items():
        text = json.dumps(settings, indent=2, sort_keys=True) + "\n"
        try:
            if path.is_file() and path.read_text() == text:
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            written.append(path)
        except OSError as exc:
            say(f"Could not write the course's Jupyter settings to {path} ({exc}). JupyterLab still works; "
                "make the environment writable (or re-create it with ./course start) to get them.")
    return written


# ----------------------------------------------------------------- the kernel extension
def load_ipython_extension(ipython: Any) -> None:
    """Called by IPython when a kernel starts (see :func:`kernel_config_file`): show failed checks
    readably. ``%tb`` still prints the full traceback, for an instructor who wants it."""
    ipython.set_custom_exc((CheckFailed,), show_check_failed)


def check_failed_lines(error: CheckFailed) -> list[str]:
    """What a learner reads when a check fails: what is still wrong, then what to do next if the
    check says it. No file names, no frames: the check's own code is not the learner's problem."""
    lines = [f"Not solved yet: {error.message}"]
    if error.hint:
        lines.append(f"  -> {error.hint}")
    return lines


def show_check_failed(shell: Any, etype: type[BaseException], value: BaseException, tb: TracebackType | None,
                      tb_offset: int | None = None) -> list[str]:
    """IPython's custom exception handler for :class:`CheckFailed`: show :func:`check_failed_lines` in
    place of the traceback, still as an error (the cell counts as failed, so "Run All" stops there).

    IPython leaves the showing to the handler; ``_showtraceback`` is the hook it shows tracebacks
    through itself, and in a kernel it sends them to the notebook. The exception is kept where
    ``%tb`` and ``%debug`` look for it.
    """
    if not isinstance(value, CheckFailed):  # IPython only calls this for CheckFailed; be safe anyway
        shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
        return []
    sys.last_type, sys.last_value, sys.last_traceback = etype, value, tb
    if sys.version_info >= (3, 12):
        sys.last_exc = value
    lines = check_failed_lines(value)
    shell._showtraceback(etype, value, lines)
    return lines


# ----------------------------------------------------------------- running JupyterLab
def running_as_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def require_free_port(port: int) -> None:
    """Fail before anything starts when the port the learner asked for is taken (0 means any port)."""
    if port == 0:
        return
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            raise PortInUseError(f"Port {port} on 127.0.0.1 is taken ({exc.strerror}).",
                                 "Choose another with --port, or use --port 0 to let the system pick a free one "
                                 "(JupyterLab prints its address).") from exc


def lab_command(root: Path, port: int | None = None, open_browser: bool = True) -> list[str]:
    """The JupyterLab command line: serve ``root``, on 127.0.0.1 only.

    ``port`` None keeps JupyterLab's default (8888, or the next free one); any other value is used as it
    is, 0 meaning a free port chosen by the system, and a taken port is an error rather than a surprise.
    """
    argv = [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={root}", "--ServerApp.ip=127.0.0.1"]
    if port is not None:
        argv += [f"--ServerApp.port={port}", "--ServerApp.port_retries=0"]
    if not open_browser:
        argv.append("--ServerApp.open_browser=False")
    if running_as_root():
        # JupyterLab refuses to run as root unless told; containers and CI machines often are root.
        argv.append("--allow-root")
    return argv


def run_lab(argv: list[str]) -> int:
    """Run JupyterLab until it exits, and return its exit code.

    Ctrl-C in the terminal reaches JupyterLab directly (it asks to confirm, then stops its kernels), so
    this process ignores it instead of killing JupyterLab mid-answer. SIGTERM, which reaches only this
    process, is passed on, so ``kill`` or a service manager stops JupyterLab and its kernels cleanly
    instead of leaving them running without their parent.
    """
    child = subprocess.Popen(argv)

    def pass_on(signum: int, _frame: FrameType | None) -> None:
        if child.poll() is None:
            child.send_signal(signum)

    previous = {signal.SIGTERM: signal.signal(signal.SIGTERM, pass_on),
                signal.SIGINT: signal.signal(signal.SIGINT, signal.SIG_IGN)}
    try:
        return child.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
