"""A lab's controllers belong to the lab: they outlive the command or kernel that started them, a later
start adopts the running one, and ``down`` stops them.

From a terminal, ``krmcourse solve`` starts the controllers an exercise needs and exits; the ``check``
that follows, a separate command, must still find them running.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from terminal import cli

from krmcourse import Lab, ManagedProcess
from krmcourse.errors import UsageError
from krmcourse.processes import managed_pid_alive

SLEEPER = "import os, time\nprint('started', os.getpid(), flush=True)\ntime.sleep(600)\n"


def _gone(pid: int) -> bool:
    return not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_alive_does_not_depend_on_what_the_process_shows_of_its_environment(tmp_path: Path) -> None:
    """A process in the middle of exec shows an empty environment for a moment (a CI run caught
    `alive` False there); one that replaces its environment never shows the marker again. Either way
    the process runs, and its pid with its start time says so."""
    blank = "import os, sys; os.execve(sys.executable, [sys.executable, '-c', 'import time; time.sleep(60)'], {})"
    proc = ManagedProcess("blank", [sys.executable, "-c", blank], {}, tmp_path)
    proc.start()
    try:
        Lab.wait_until(lambda: Path(f"/proc/{proc.pid}/environ").read_bytes() == b"", timeout=30,
                       message="the process never replaced its environment")
        assert proc.alive
        again = ManagedProcess("blank", [sys.executable, "-c", blank], {}, tmp_path).start()
        assert again.adopted and again.pid == proc.pid
    finally:
        proc.stop()
    assert not proc.alive and _gone(proc.pid or 0)


def test_two_starts_at_once_make_one_process(tmp_path: Path) -> None:
    """A notebook cell and a terminal `solve` starting the same controller together: one runs, both
    know it (a second copy would be in no pid file, and nothing would ever stop it)."""
    starter = ("import sys; from pathlib import Path; from krmcourse import ManagedProcess; "
               "p = ManagedProcess('twin', [sys.executable, '-c', 'import time; time.sleep(60)'], {}, "
               f"Path({str(tmp_path)!r})).start(); print(p.pid)")
    runs = [subprocess.Popen([sys.executable, "-c", starter], stdout=subprocess.PIPE, text=True) for _ in range(4)]
    pids = {int(run.communicate(timeout=60)[0]) for run in runs}
    twins = [p for p in psutil.process_iter(["pid"]) if _marked(p, "twin")]
    try:
        assert len(pids) == 1 and {p.pid for p in twins} == pids, (pids, twins)
    finally:
        for twin in twins:
            twin.kill()


def _marked(proc: psutil.Process, name: str) -> bool:
    try:
        return proc.environ().get("KRMCOURSE_MANAGED") == name
    except psutil.Error:
        return False


@pytest.mark.cluster
def test_a_controller_outlives_its_starter_and_is_adopted_not_doubled(tmp_path: Path) -> None:
    script = tmp_path / "sleeper.py"
    script.write_text(SLEEPER)
    lab = Lab("sandbox", instance="adopt").up()
    try:
        # Another interpreter (a notebook kernel, a `krmcourse solve`) starts it and exits.
        starter = ("from krmcourse import Lab; p = Lab('sandbox', instance='adopt').run_controller("
                   f"{str(script)!r}); p.wait_for_log('started'); print(p.pid)")
        done = subprocess.run([sys.executable, "-c", starter], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        pid = int(done.stdout.split()[-1])
        assert managed_pid_alive(pid, "sleeper"), "the controller died with the interpreter that started it"

        proc = lab.run_controller(script)  # this interpreter finds it: no second copy
        assert proc.adopted and proc.pid == pid
        assert f"started {pid}" in proc.wait_for_log("started", timeout=5)

        # A fresh Lab (as another interpreter has) with the same name, started differently: replaced.
        other = Lab("sandbox", instance="adopt").run_controller(script, "--verbose")
        assert not other.adopted and other.pid != pid and _gone(pid)
        other.wait_for_log("started")
    finally:
        lab.down()
    assert _gone(other.pid), "down left the lab's controller running"


@pytest.mark.cluster
@pytest.mark.parametrize(("lab_name", "exercise"), [("provisioner", "succinct-bucket"),
                                                    ("enforcer", "sidecar-policy")])
def test_check_solve_check_as_separate_commands(lab_name: str, exercise: str) -> None:
    """The round trip a learner makes in a terminal: each step is its own process."""
    where = [lab_name, "--instance", "cli"]

    up = cli("up", *where)
    assert up.returncode == 0, up.stdout + up.stderr
    try:
        before = cli("check", *where, exercise)
        assert before.returncode != 0, f"{exercise} passed before it was solved:\n{before.stdout}"
        solved = cli("solve", *where, exercise)
        assert solved.returncode == 0, solved.stdout + solved.stderr
        after = cli("check", *where, exercise)
        assert after.returncode == 0, (f"{exercise} failed its check after `solve` had exited:\n"
                                       f"{after.stdout}{after.stderr}")
        # What runs, and what it said, can be seen from the terminal too.
        listed = cli("logs", *where)
        names = [line.split()[0] for line in listed.stdout.splitlines() if " pid " in line]
        assert names, f"`krmcourse logs` lists no controller after `solve`:\n{listed.stdout}{listed.stderr}"
        assert "controllers:" in cli("status", *where).stdout
        shown = cli("logs", lab_name, names[0], *where[1:], "--lines", "5")
        assert shown.returncode == 0 and shown.stdout.strip(), shown.stderr
        assert len(shown.stdout.strip().splitlines()) <= 5
        unknown = cli("logs", lab_name, "no-such-controller", *where[1:])
        assert unknown.returncode == 2 and names[0] in unknown.stderr, unknown.stderr
    finally:
        down = cli("down", *where)
        assert down.returncode == 0, down.stdout + down.stderr
        assert "runs no controller" in cli("logs", *where).stdout


@pytest.mark.cluster
def test_a_declared_controller_is_started_adopted_and_stopped_by_name() -> None:
    """lab.start runs what lab.yaml declares, as its ServiceAccount; another Lab object adopts it."""
    lab = Lab("governor", instance="declared").up()
    try:
        first = lab.start("governor")
        assert lab.running() == {"governor": first.pid}
        assert "system:serviceaccount:shop:queue-governor" in (lab.home / "identities").joinpath(
            "shop.queue-governor.kubeconfig").read_text()
        again = Lab("governor", instance="declared").start("governor")
        assert again.pid == first.pid and again.adopted
        with pytest.raises(UsageError, match="declares no controller 'governer'") as unknown:
            lab.start("governer")
        assert "governor" in unknown.value.hint
        assert lab.stop("governor") and lab.running() == {}
        assert not lab.stop("governor")
    finally:
        lab.down()


def _wants(old: int, new: int) -> bool:
    return old != new


def test_a_learners_code_is_saved_private_and_an_edit_restarts_its_controller(tmp_path: Path) -> None:
    """lab.save_code keeps a notebook function where a controller loads it; editing it is a new start."""
    lab = Lab("sandbox", instance="savecode")
    script = tmp_path / "loader.py"
    script.write_text("import sys, time\nfrom krmcourse.labcode import script_module\n"
                      "print('loaded', script_module(sys.argv[1])._wants(1, 2), flush=True)\ntime.sleep(600)\n")
    try:
        saved = lab.save_code("predicate", _wants)
        assert saved.read_text().startswith("def _wants(old: int, new: int) -> bool:")
        assert saved.stat().st_mode & 0o777 == 0o600
        first = lab.run_controller(script, str(saved), name="loader")
        first.wait_for_log("loaded True")
        again = Lab("sandbox", instance="savecode")  # as another kernel, or `krmcourse solve`, would
        assert again.run_controller(script, str(saved), name="loader").adopted  # same code: the same process
        again.save_code("predicate", _wants)  # a cell run twice saves the same code again: the same process
        assert Lab("sandbox", instance="savecode").run_controller(script, str(saved), name="loader").pid == first.pid
        lab.save_code("predicate", "def _wants(old, new):\n    return False\n")
        second = Lab("sandbox", instance="savecode").run_controller(script, str(saved), name="loader")
        assert not second.adopted and _gone(first.pid)
        second.wait_for_log("loaded False")
        with pytest.raises(UsageError, match="Cannot read the source"):
            lab.save_code("predicate", print)
    finally:
        lab.stop("loader")
        shutil.rmtree(lab.home, ignore_errors=True)
