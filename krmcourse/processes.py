"""Controllers, operators and helper services that a lab runs beside its cluster.

A lab's processes belong to the lab, not to whoever started them. Each one is started detached (in a
session of its own, handed to init), logs to a file in the lab's folder and is recorded there in a pid
file. So a controller that ``krmcourse solve`` started is still running for the ``krmcourse check`` that
follows; a restarted notebook kernel finds it (:meth:`ManagedProcess.start` adopts it) instead of starting
a second one; and ``down``, ``reset`` and ``krmcourse doctor --fix`` stop it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .errors import WaitTimeout
from .paths import file_lock, private_file

#: Processes this interpreter started or adopted: their logs go into a failed test's report.
_SEEN: list[ManagedProcess] = []

#: Set in the environment of every managed process, so leftovers can be recognised safely.
MARKER = "KRMCOURSE_MANAGED="


def _record(pid_path: Path) -> dict[str, Any]:
    """What a pid file says: ``{"pid", "started", "identity", "log_offset"}`` (or a bare pid)."""
    try:
        record = json.loads(pid_path.read_text())
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {"pid": record}


def _started(pid: int) -> int | None:
    """When ``pid`` started (clock ticks after boot), or None once it has exited (a zombie has).

    A pid and its start time name one process for good: a reused pid has another start time. Unlike
    the environment, this is readable at every moment of the process's life, ``exec`` included.
    """
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    return None if fields[0] in ("Z", "X") else int(fields[19])


def managed_pid_alive(pid: int, name: str | None = None) -> bool:
    """Whether ``pid`` is a running process that krmcourse started (as ``name``, when given).

    The marker in its environment guards against a reused pid. (A process in the middle of ``exec``
    shows no environment yet: for a process just started, compare start times instead.)
    """
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    if _started(pid) is None:
        return False
    if name is None:
        return MARKER.encode() in environ
    return b"\0" + (MARKER + name).encode() + b"\0" in b"\0" + environ + b"\0"


def _running(pid: int, started: int | None) -> bool:
    """Whether the process recorded as (``pid``, ``started``) still runs; without a start time, by its marker."""
    return _started(pid) == started if started is not None else managed_pid_alive(pid)


class ManagedProcess:
    """A process that belongs to a lab, started by :meth:`krmcourse.Lab.run_controller` and friends.

    >>> proc = lab.run_controller(lab.path / "controller.py")   # doctest: +SKIP
    >>> proc.wait_for_log("reconciled")                         # doctest: +SKIP
    >>> proc.stop()                                             # doctest: +SKIP

    ``identity`` says what makes two starts the same process (by default its command line): a start
    adopts a recorded process with the same name and identity, and replaces one with another.
    """

    def __init__(self, name: str, argv: list[str], env: dict[str, str], folder: Path,
                 cwd: Path | None = None, identity: str | None = None) -> None:
        self.name = name
        self.argv = argv
        self.env = {**env, MARKER[:-1]: name}
        self.cwd = cwd
        self.folder = folder
        self.identity = identity if identity is not None else json.dumps(argv)
        self.log_path = folder / f"{name}.log"
        self.pid_path = folder / f"{name}.pid"
        self._pid: int | None = None
        self._started: int | None = None
        self._log_offset = 0
        self.adopted = False

    def start(self) -> ManagedProcess:
        """Start the process, or adopt the lab's running one with the same name and identity."""
        if self.alive:
            return self
        with file_lock(self._lock_path):  # two interpreters starting the same name: one decides at a time
            record = _record(self.pid_path)
            pid, started = record.get("pid"), record.get("started")
            if isinstance(pid, int) and isinstance(started, int) and _running(pid, started):
                if record.get("identity") == self.identity:
                    self._pid, self._started, self.adopted = pid, started, True
                    self._log_offset = int(record.get("log_offset") or 0)
                    self._remember()
                    return self
                _stop_pid(pid, started, timeout=10)  # the same name, started differently: replace it
            elif isinstance(pid, int) and not isinstance(started, int) and managed_pid_alive(pid, self.name):
                _stop_pid(pid, None, timeout=10)  # recorded without a start time: it cannot be adopted safely
            self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
            self._pid = spawn_detached(self.argv, self.log_path, self.env, cwd=self.cwd)
            self._started = _started(self._pid)
            self.adopted = False
            # How it was started is recorded too, so that a restored snapshot can start it again (mode
            # 0600: its environment is the starter's).
            scratch = private_file(self.pid_path.with_suffix(".pid.new"), json.dumps(
                {"pid": self._pid, "started": self._started, "identity": self.identity,
                 "log_offset": self._log_offset, "argv": self.argv, "env": self.env,
                 "cwd": str(self.cwd) if self.cwd else None}))
            scratch.replace(self.pid_path)  # readers see the old record or the new one, never half of one
        self._remember()
        return self

    @property
    def _lock_path(self) -> Path:
        return self.folder / f"{self.name}.lock"

    def _remember(self) -> None:
        if self not in _SEEN:
            _SEEN.append(self)

    @property
    def pid(self) -> int | None:
        return self._pid

    @property
    def alive(self) -> bool:
        return self._pid is not None and self._started is not None and _started(self._pid) == self._started

    def logs(self, since_start: bool = True) -> str:
        """The log text, from this start (default) or from the first start."""
        if not self.log_path.exists():
            return ""
        data = self.log_path.read_bytes()
        return data[self._log_offset if since_start else 0:].decode(errors="replace")

    def wait_for_log(self, text: str, timeout: float = 30) -> str:
        """Wait until ``text`` appears in the log; fail fast, with the log, if the process dies."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out = self.logs()
            if text in out:
                return out
            if not self.alive:
                raise RuntimeError(f"{self.name} exited before logging {text!r}. Its log:\n{out[-3000:]}")
            time.sleep(0.1)
        raise WaitTimeout(f"{self.name} did not log {text!r} within {timeout:.0f} s. Its log:\n"
                          f"{self.logs()[-3000:]}",
                          "The log above shows how far it got: an error there, or a wait on something the "
                          "cluster never sent, is the place to start.")

    def stop(self, timeout: float = 10) -> None:
        """SIGTERM the process group, SIGKILL after ``timeout``, wait until it has gone, and forget it."""
        with file_lock(self._lock_path):
            if self._pid is not None:
                _stop_pid(self._pid, self._started, timeout)
                if _record(self.pid_path).get("pid") == self._pid:  # another start's record stays
                    self.pid_path.unlink(missing_ok=True)
        if self in _SEEN:
            _SEEN.remove(self)

    def kill(self) -> None:
        """SIGKILL at once, as a crash would: no cleanup runs in the process."""
        if self._pid is not None:
            _stop_pid(self._pid, self._started, timeout=0)

    def kill_after_log(self, text: str, timeout: float = 60) -> None:
        """Crash it in the middle of its work: SIGKILL as soon as ``text`` appears in its log."""
        self.wait_for_log(text, timeout=timeout)
        self.kill()

    def restart(self) -> ManagedProcess:
        self.stop()
        return self.start()

    def __repr__(self) -> str:
        state = "running" if self.alive else "exited"
        return f"<ManagedProcess {self.name} pid={self.pid} {state}>"


def _stop_pid(pid: int, started: int | None, timeout: float) -> None:
    """Signal a managed process group (SIGTERM, or SIGKILL at once when ``timeout`` is 0) until it has gone."""
    if not _running(pid, started):  # gone already, or the pid is no longer ours
        return
    started = _started(pid)  # the process we found, from here on (a marker-only record has no start time)
    for sig, wait in (((signal.SIGTERM, timeout),) if timeout > 0 else ()) + ((signal.SIGKILL, 10.0),):
        if _started(pid) != started:
            break
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            break
        deadline = time.monotonic() + wait
        while _started(pid) == started and time.monotonic() < deadline:
            time.sleep(0.05)
    if _started(pid) in (None, started):  # not if the pid now names someone else's process
        try:
            os.killpg(pid, signal.SIGKILL)  # anything the process itself left in its group
        except (ProcessLookupError, PermissionError):
            pass


#: Starts the program in sys.argv[2:] with its output appended to sys.argv[1], prints its pid, and
#: exits: the program is then nobody's child, as a daemon is.
_LAUNCHER = """import subprocess, sys
log = open(sys.argv[1], "ab")
child = subprocess.Popen(sys.argv[2:], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                         start_new_session=True)
print(child.pid)
"""


def spawn_detached(argv: list[str], log: Path, env: dict[str, str], cwd: Path | None = None) -> int:
    """Start a program that belongs to a cluster, not to this process, and return its pid.

    Part of a cluster (kwok beside a kind node, say) must outlive whoever ran ``up``, a notebook kernel
    or ``krmcourse start``, and must not count among its children; kwokctl starts its components the
    same way. A short-lived launcher starts it in a session of its own and exits, so the program is
    handed to init. Stop it by its pid (``down`` does).
    """
    done = subprocess.run([sys.executable, "-c", _LAUNCHER, str(log), *argv], env=env, cwd=cwd,
                          capture_output=True, text=True, check=True)
    return int(done.stdout)


def kill_recorded(folder: Path) -> list[int]:
    """Kill every process recorded in ``folder`` (a lab's processes), and remove the records."""
    killed = []
    for pid_file in folder.glob("*.pid"):
        record = _record(pid_file)
        pid, started = record.get("pid"), record.get("started")
        # A pid can be reused: only kill the process recorded, by its start time (or marker).
        if isinstance(pid, int) and _running(pid, started if isinstance(started, int) else None):
            _stop_pid(pid, started if isinstance(started, int) else None, timeout=0)
            killed.append(pid)
        pid_file.unlink(missing_ok=True)
    return killed


def stop_recorded(folder: Path, name: str, timeout: float = 10) -> bool:
    """Stop the process recorded in ``folder`` as ``name``, whoever started it; False if none ran."""
    pid_file = folder / f"{name}.pid"
    if not pid_file.exists():  # never started here (or the lab is down): nothing to stop, nothing to write
        return False
    with file_lock(folder / f"{name}.lock"):
        record = _record(pid_file)
        pid, started = record.get("pid"), record.get("started")
        started = started if isinstance(started, int) else None
        ran = isinstance(pid, int) and _running(pid, started)
        if ran and isinstance(pid, int):
            _stop_pid(pid, started, timeout)
        pid_file.unlink(missing_ok=True)
    return ran


def live_processes(folder: Path) -> dict[str, int]:
    """The processes recorded in ``folder`` that still run, by name: whichever interpreter started them."""
    alive = {}
    for pid_file in sorted(folder.glob("*.pid")):
        record = _record(pid_file)
        pid, started = record.get("pid"), record.get("started")
        if isinstance(pid, int) and _running(pid, started if isinstance(started, int) else None):
            alive[pid_file.stem] = pid
    return alive


def running_starts(folder: Path) -> dict[str, dict[str, Any]]:
    """How each process recorded in ``folder`` that runs now was started (argv, env, cwd, identity), by
    name; what :func:`start_again` takes."""
    starts = {}
    for name in live_processes(folder):
        record = _record(folder / f"{name}.pid")
        if isinstance(record.get("argv"), list) and isinstance(record.get("env"), dict):
            starts[name] = {k: record.get(k) for k in ("argv", "env", "cwd", "identity")}
    return starts


def start_again(folder: Path, name: str, start: dict[str, Any]) -> ManagedProcess:
    """Start a process the way :func:`running_starts` recorded it (adopting it if it runs that way)."""
    env = {k: v for k, v in start["env"].items() if k != MARKER[:-1]}
    return ManagedProcess(name, start["argv"], env, folder, cwd=Path(start["cwd"]) if start.get("cwd") else None,
                          identity=start.get("identity")).start()


def seen() -> list[ManagedProcess]:
    """Every managed process this interpreter started or adopted and has not stopped, running or exited."""
    return list(_SEEN)
