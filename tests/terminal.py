"""The course's command line as a learner meets it in a terminal: each call is a process of its own."""

from __future__ import annotations

import subprocess
import sys

#: ``krmcourse`` as the installed script runs it, with this interpreter.
CLI = [sys.executable, "-m", "krmcourse.cli"]


def cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run ``krmcourse ARGS`` to its end and keep what it printed."""
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout)


def said(done: subprocess.CompletedProcess[str]) -> str:
    return done.stdout + done.stderr
