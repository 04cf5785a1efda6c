"""Controllers, operators and helper services that a lab runs beside its cluster.

Every process is started in its own session, logs to a file, and is registered so that
``Lab.down()``, interpreter exit and ``krmcourse doctor`` can find it; on Linux it also dies with the
Python process that started it, so a killed Jupyter kernel leaves nothing behind.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

_RUNNING: list[ManagedProcess] = []

#: Set in the environment of every managed process, so leftovers can be recognised safely.
MARKER = "KRMCOURSE_MANAGED="


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        except OSError:
            pass


class ManagedProcess:
    """A child process with a log file, started by :meth:`krmcourse.Lab.run_controller` and friends.

    >>> proc = lab.run_controller(lab.path / "controller.py")   # doctest: +SKIP
    >>> proc.wait_for_log("reconciled")                         # doctest: +SKIP
    >>> proc.stop()                                             # doctest: +SKIP
    """

    def __init__(self, name: str, argv: list[str], env: dict[str, str], folder: Path,
                 cwd: Path | None = None) -> None:
        self.name = name
        self.argv = argv
        self.env = {**env, MARKER[:-1]: name}
        self.cwd = cwd
        self.folder = folder
        self.log_path = folder / f"{name}.log"
        self.pid_path = folder / f"{name}.pid"
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_offset = 0

    def start(self) -> ManagedProcess:
        if self.alive:
            return self
        self.folder.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        self._log_offset = self.log_path.stat().st_size
        try:
            self._proc = subprocess.Popen(self.argv, env=self.env, cwd=self.cwd, stdout=log,
                                          stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          start_new_session=True, preexec_fn=_die_with_parent)
        finally:
            log.close()
        self.pid_path.write_text(str(self._proc.pid))
        if self not in _RUNNING:
            _RUNNING.append(self)
        return self

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def returncode(self) -> int | None:
        return self._proc.poll() if self._proc else None

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
                raise RuntimeError(f"{self.name} exited (code {self.returncode}) before logging "
                                   f"{text!r}. Its log:\n{out[-3000:]}")
            time.sleep(0.1)
        raise TimeoutError(f"{self.name} did not log {text!r} within {timeout:.0f} s. Its log:\n"
                           f"{self.logs()[-3000:]}")

    def _signal(self, sig: int) -> None:
        if self._proc is None:
            return
        try:
            os.killpg(self._proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def stop(self, timeout: float = 10) -> None:
        """SIGTERM the process group, SIGKILL after ``timeout``, and forget it."""
        if self._proc is not None and self._proc.poll() is None:
            self._signal(signal.SIGTERM)
            try:
                self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self._proc.wait(5)
        self._signal(signal.SIGKILL)  # anything the process itself left in its group
        self.pid_path.unlink(missing_ok=True)
        if self in _RUNNING:
            _RUNNING.remove(self)

    def kill(self) -> None:
        """SIGKILL at once, as a crash would: no cleanup runs in the process."""
        self._signal(signal.SIGKILL)
        if self._proc is not None:
            self._proc.wait(5)

    def restart(self) -> ManagedProcess:
        self.stop()
        return self.start()

    def __repr__(self) -> str:
        state = "running" if self.alive else f"exited {self.returncode}"
        return f"<ManagedProcess {self.name} pid={self.pid} {state}>"


#: Starts the program in sys.argv[2:] with its output appended to sys.argv[1], prints its pid, and
#: exits: the program is then nobody's child, as a daemon is.
_LAUNCHER = """import subprocess, sys
log = open(sys.argv[1], "ab")
child = subprocess.Popen(sys.argv[2:], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                         start_new_session=True)
print(child.pid)
"""


def spawn_detached(argv: list[str], log: Path, env: dict[str, str]) -> int:
    """Start a program that belongs to a cluster, not to this process, and return its pid.

    Part of a cluster (kwok beside a kind node, say) must outlive whoever ran ``up``, a notebook kernel
    or ``krmcourse start``, and must not count among its children; kwokctl starts its components the
    same way. A short-lived launcher starts it in a session of its own and exits, so the program is
    handed to init. Stop it by its pid (``down`` does).
    """
    done = subprocess.run([sys.executable, "-c", _LAUNCHER, str(log), *argv], env=env, capture_output=True,
                          text=True, check=True)
    return int(done.stdout)


def kill_recorded(folder: Path) -> list[int]:
    """Kill processes recorded in ``folder`` by an earlier Python that did not stop them."""
    killed = []
    for pid_file in folder.glob("*.pid"):
        try:
            pid = int(pid_file.read_text().strip())
            # A pid can be reused: only kill a process that carries our marker in its environment.
            if MARKER.encode() in Path(f"/proc/{pid}/environ").read_bytes():
                os.killpg(pid, signal.SIGKILL)
                killed.append(pid)
        except (ValueError, OSError):
            pass
        pid_file.unlink(missing_ok=True)
    return killed


def running() -> list[ManagedProcess]:
    return list(_RUNNING)


@atexit.register
def _stop_all() -> None:
    for proc in list(_RUNNING):
        proc.stop(timeout=3)
