"""Each test process's own krmcourse state folder, and taking down what a stopped run left in one.

A run removes its folders at its end (conftest's pytest_sessionfinish). A run stopped by SIGTERM or
SIGKILL never gets there, and the clusters it started keep running: kwokctl's components and kind's node
containers outlive the process that asked for them. Each folder therefore names the process it belongs
to, and the next run takes down every folder whose process has gone (conftest's pytest_sessionstart).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import psutil

PREFIX = "krmcourse-test-"
#: The file in a test state folder that names its process: "PID START-TIME".
OWNER = "owner"


def make(worker: str) -> Path:
    """A new test state folder for this process (``worker`` is its pytest-xdist name, or "main")."""
    home = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{worker}-"))
    (home / OWNER).write_text(f"{os.getpid()} {psutil.Process().create_time()}\n")
    return home


def abandoned() -> list[Path]:
    """This user's test state folders whose process has ended without removing them. A folder that names
    no process yet belongs to a run that is starting, and one whose process cannot be read is left alone."""
    found = []
    for home in Path(tempfile.gettempdir()).glob(f"{PREFIX}*"):
        try:
            if home.stat().st_uid != os.getuid():
                continue
            pid, started = (home / OWNER).read_text().split()
            if psutil.Process(int(pid)).create_time() != float(started):  # the pid was reused
                found.append(home)
        except psutil.NoSuchProcess:
            found.append(home)
        except (OSError, ValueError, psutil.Error):
            continue
    return found


def take_down(home: Path) -> list[str]:
    """Stop every controller and delete every cluster of the test state folder ``home``, then remove the
    folder. Returns the clusters it deleted."""
    from krmcourse.paths import state_of
    from krmcourse.processes import kill_recorded
    from krmcourse.providers.kind import KindProvider
    from krmcourse.providers.kwok import KwokProvider

    deleted = []
    with state_of(home):
        for folder in (home / "labs").glob("*/processes"):  # controllers belong to their lab
            kill_recorded(folder)
        for provider in (KwokProvider(), KindProvider()):
            for cluster in provider.clusters():  # this folder's only
                provider.delete(cluster)
                deleted.append(cluster)
    shutil.rmtree(home, ignore_errors=True)
    return deleted
