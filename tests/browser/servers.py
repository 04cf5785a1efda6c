"""JupyterLab servers for the browser tests, and everything needed to stop them without leftovers.

A server is started the way a learner starts one (``./course start``), or with the same command line
``krmcourse start`` uses (:func:`krmcourse.jupyter.lab_command`) on a folder of the test's own. Either
way it runs with a home folder of its own, so the learner's ``~/.jupyter``, ``~/.ipython`` and
kernel specs neither leak into the test nor get written by it, and it picks a free port itself: the
tests read the address back from what it prints, as a learner does.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from krmcourse import Lab
from krmcourse.paths import cache_dir

ROOT = Path(__file__).resolve().parents[2]
#: What JupyterLab prints for the learner to open: its own address, with the token.
ADDRESS = re.compile(r"http://127\.0\.0\.1:(\d+)/lab\?token=([0-9a-f]+)")


def isolated_env(folder: Path, **extra: str) -> dict[str, str]:
    """The environment of a JupyterLab started by a test, and so of its kernels: a home folder inside
    ``folder``, with every Jupyter and IPython folder in it. The toolchain cache stays where it is (it
    is found through the real home, and rebuilding it would take many minutes); the lab clusters'
    state folder is the test process's own, as conftest.py set it."""
    home = folder / "home"
    env = {key: value for key, value in os.environ.items() if not key.startswith("JUPYTER_")}
    env.update(
        HOME=str(home),
        JUPYTER_CONFIG_DIR=str(home / ".jupyter"),
        JUPYTER_DATA_DIR=str(home / ".local" / "share" / "jupyter"),
        JUPYTER_RUNTIME_DIR=str(home / ".local" / "share" / "jupyter" / "runtime"),
        IPYTHONDIR=str(home / ".ipython"),
        MPLCONFIGDIR=str(home / ".config" / "matplotlib"),
        KRMCOURSE_CACHE=str(cache_dir()),
        PYTHONUNBUFFERED="1",
        **extra,
    )
    home.mkdir(parents=True, exist_ok=True)
    return env


def course_install_is_current(venv: Path) -> bool:
    """Whether ``./course`` would start at once rather than reinstall the course's packages first.

    It is the same test ``ensure_env`` in ``course`` makes (its stamp file, pyproject.toml's age, the
    package's file list). A test must never make ``./course`` reach for a package registry, so it
    checks first; ``./course test`` has always just made the install current.
    """
    stamp = venv / ".krmcourse-installed"
    if not stamp.is_file() or (ROOT / "pyproject.toml").stat().st_mtime > stamp.stat().st_mtime:
        return False
    files = subprocess.run(["bash", "-c", "find krmcourse -name '*.py' -not -path '*/__pycache__/*' | sort | cksum"],
                           cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return stamp.read_text().strip() == files.strip()


@dataclass
class Server:
    """A running JupyterLab, as the first process of its own session (so nothing of it outlives a test)."""

    process: subprocess.Popen[bytes]
    log: Path
    port: int
    token: str

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def url(self, path: str = "lab") -> str:
        """An address in JupyterLab with the token, as the learner opens it from the printed link."""
        return f"{self.base}{path}?token={self.token}"

    def get(self, path: str, token: bool = True) -> tuple[int, Any]:
        """GET a REST path; the status and the decoded JSON (None when the answer is not JSON)."""
        return self.request("GET", path, token)

    def request(self, method: str, path: str, token: bool = True) -> tuple[int, Any]:
        request = urllib.request.Request(self.base + path, method=method)
        if token:
            request.add_header("Authorization", f"token {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                status, body = answer.status, answer.read()
        except urllib.error.HTTPError as error:
            status, body = error.code, error.read()
        try:
            return status, json.loads(body)
        except ValueError:
            return status, None

    def shutdown_kernels(self, timeout: float = 120) -> None:
        """Shut down every kernel, as "Shut Down All Kernels" does, and wait until none is listed."""
        for kernel in self.get("api/kernels")[1] or []:
            self.request("DELETE", f"api/kernels/{kernel['id']}")
        Lab.wait_until(lambda: self.get("api/kernels")[1] == [], timeout,
                       message="JupyterLab still lists kernels after shutting them down")

    def log_tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else "(no log)"

    def jupyter_processes(self) -> list[psutil.Process]:
        """The process and all its descendants: JupyterLab itself and its kernels among them."""
        try:
            first = psutil.Process(self.process.pid)
            return [first, *first.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def listening_addresses(self) -> set[str]:
        """Every address a process of this server listens on (kernels listen on 127.0.0.1 too)."""
        addresses = set()
        for proc in self.jupyter_processes():
            try:
                connections = proc.net_connections(kind="inet")
            except psutil.Error:
                continue
            addresses |= {c.laddr.ip for c in connections if c.status == psutil.CONN_LISTEN}
        return addresses


def start(argv: list[str], env: dict[str, str], log: Path, timeout: float = 300) -> Server:
    """Start a server, and wait until it prints its address and then accepts connections there. Fails at
    once, with its output, if it exits first.

    Jupyter Server prints its URL before its event loop binds the port, so on a busy machine the
    address can be printed a moment before anything listens on it."""
    with open(log, "wb") as out:
        process = subprocess.Popen(argv, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)

    def address() -> re.Match[str] | None:
        found = ADDRESS.search(log.read_text(errors="replace"))
        if found is None and process.poll() is not None:
            raise RuntimeError(f"{argv[0]} exited ({process.returncode}) before printing its address:\n"
                               f"{log.read_text(errors='replace')[-4000:]}")
        return found

    def listening(port: int) -> bool:
        if _accepts(port):
            return True
        if process.poll() is not None:
            raise RuntimeError(f"{argv[0]} exited ({process.returncode}) after printing its address:\n"
                               f"{log.read_text(errors='replace')[-4000:]}")
        return False

    try:
        found = Lab.wait_until(address, timeout, interval=0.3,
                               message=f"{' '.join(argv[:3])} printed no address; see {log}")
        port = int(found.group(1))
        Lab.wait_until(lambda: listening(port), 60, interval=0.1,
                       message=f"{' '.join(argv[:3])} printed its address and never listened there; see {log}")
    except BaseException:
        _kill_group(process)
        raise
    return Server(process, log, port, found.group(2))


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def stop(server: Server, timeout: float = 120) -> list[str]:
    """Stop a server as ``kill`` would (SIGTERM), and wait until it and every process it had started
    (kernels) are gone. Returns what had to be killed after the timeout: a test fails on any."""
    before = server.jupyter_processes()
    if server.process.poll() is None:
        server.process.send_signal(signal.SIGTERM)
    try:
        server.process.wait(timeout)
    except subprocess.TimeoutExpired:
        pass
    _, alive = psutil.wait_procs(before, timeout=max(5.0, timeout / 4))
    leftovers = [_describe(p) for p in alive]
    for proc in alive:
        _kill(proc)
    _kill_group(server.process)
    return leftovers


def _describe(proc: psutil.Process) -> str:
    try:
        return f"pid {proc.pid}: {' '.join(proc.cmdline())[:200]}"
    except psutil.Error:
        return f"pid {proc.pid}"


def _kill(proc: psutil.Process) -> None:
    try:
        proc.kill()
    except psutil.Error:
        pass


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL whatever is left in the server's session group, then reap the first process."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        pass


def new_paths(before: set[Path], candidates: Iterable[Path]) -> list[Path]:
    """Which of ``candidates`` exist now but did not before: what a test left in a home folder."""
    return sorted(p for p in candidates if p.exists() and p not in before)


def existing(candidates: Iterable[Path]) -> set[Path]:
    return {p for p in candidates if p.exists()}


def plain_lab_command(root: Path, settings: Path) -> list[str]:
    """JupyterLab as it comes, with none of the course's settings (``settings`` is an empty folder in
    place of the application's settings folder): what the course's configuration is compared with."""
    argv = [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={root}", "--ServerApp.ip=127.0.0.1",
            "--ServerApp.port=0", "--ServerApp.port_retries=0", "--ServerApp.open_browser=False",
            f"--LabApp.app_settings_dir={settings}"]
    if os.geteuid() == 0:
        argv.append("--allow-root")
    return argv
