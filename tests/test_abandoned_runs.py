"""A test run stopped by a signal skips its own clean-up; the next run takes down what it left running."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import testhome

from krmcourse.paths import state_dir

pytestmark = [pytest.mark.cluster, pytest.mark.every_provider]

# A run's process, cut down to what matters here: its own state folder, a lab up in it, and no ending.
RUN = """
import os, signal, testhome
home = testhome.make("abandoned")
os.environ["KRMCOURSE_HOME"] = str(home)
from krmcourse import Lab
lab = Lab("sandbox").up()
print("up:", home, lab.server, flush=True)
signal.pause()
"""


def _answers(server: str) -> bool:
    url = urlsplit(server)
    try:
        with socket.create_connection((url.hostname, url.port), timeout=5):
            return True
    except OSError:
        return False


def test_a_run_killed_with_its_cluster_up_is_taken_down_by_the_next() -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent)}
    del env["KRMCOURSE_HOME"]
    run = subprocess.Popen([sys.executable, "-c", RUN], env=env, stdout=subprocess.PIPE, text=True)
    home = None
    try:
        assert run.stdout is not None
        said = next((line.split() for line in run.stdout if line.startswith("up: ")), None)
        assert said, "the stand-in run did not bring its lab up"
        home, server = Path(said[1]), said[2]
        assert _answers(server)
        assert home not in testhome.abandoned(), "a run that is still going was counted as abandoned"

        run.send_signal(signal.SIGKILL)
        run.wait(timeout=30)
        assert _answers(server), "the cluster went with its run: there is nothing left to take down"
        assert home in testhome.abandoned()

        assert testhome.take_down(home) == ["krm-sandbox"]
        assert not home.exists()
        assert not _answers(server)
        assert home not in testhome.abandoned()
    finally:
        run.kill()
        run.wait(timeout=30)
        if home is not None and home.exists():
            testhome.take_down(home)


def test_a_running_test_process_and_a_folder_still_being_made_are_left_alone() -> None:
    assert (state_dir() / testhome.OWNER).exists()
    assert state_dir() not in testhome.abandoned()
    starting = Path(tempfile.mkdtemp(prefix=testhome.PREFIX))  # no owner written yet
    try:
        assert starting not in testhome.abandoned()
    finally:
        starting.rmdir()
