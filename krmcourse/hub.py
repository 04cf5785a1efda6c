"""A JupyterHub for a workshop room, on one machine: learner accounts, a shared course, the hub itself.

``krmcourse hub start --learners N`` (as root) makes everything a room needs:

- one Unix account per learner (``learner01`` ...), each with a home of mode 0700, a copy of the course's
  notebooks there (a learner's edits are their own), and a random password in a file only root reads;
- a shared, read-only environment outside ``/root`` (``/opt/krmcourse`` by default, ``--prefix``): a venv
  made with the system's Python, holding the course, JupyterLab and JupyterHub, installed from a
  wheelhouse that ``krmcourse hub prepare`` filled beforehand (so starting a hub needs no registry), and
  a copy of the lab toolchain, which learners find through ``KRMCOURSE_CACHE``. The project's own venv
  and toolchain live under ``/root``, which learners cannot enter;
- JupyterHub with its proxy (configurable-http-proxy, from npm, in the cache), on 127.0.0.1 only: PAM
  logins for the learners and one admin account, each learner's JupyterLab run as that learner by the
  LocalProcessSpawner. Each learner's lab clusters, state and kubeconfigs (mode 0600) are under their
  own home, ``~/.local/state/krmcourse``.

The hub's own files (its database, cookie secret, proxy and API tokens, the passwords, logs, and the
room's record) are in ``$KRMCOURSE_HOME/hub``. ``krmcourse hub stop`` stops the hub, its proxy, every
learner's server and every learner's lab clusters.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import secrets
import shutil
import stat
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import psutil

from . import toolchain
from .errors import KrmcourseError, PortInUseError, UsageError
from .jupyter import require_free_port
from .lab import MAX_LABS_ENV, Lab
from .paths import cache_dir, create_readable, locks_dir, private_file, state_dir
from .processes import ManagedProcess, live_processes, stop_recorded
from .providers.kwok import PORTS_LOCK, free_ports

Say = Callable[[str], None]

#: Where the shared environment goes unless ``--prefix`` or ``KRMCOURSE_HUB_PREFIX`` says otherwise.
DEFAULT_PREFIX = Path("/opt/krmcourse")
#: The Python the shared venv is made with: the system's, which every account can run.
DEFAULT_PYTHON = "/usr/bin/python3"
#: configurable-http-proxy, the hub's proxy, from npm.
PROXY_PACKAGE = "configurable-http-proxy@5.3.0"
#: What the repository copy in the shared environment holds: the package, the labs, the notebooks.
COURSE_FILES = ("krmcourse", "labs", "notebooks", "datasets", "pyproject.toml", "README.md")
NOT_COPIED = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints", "build", "*.egg-info")
#: Unix account names this module makes (useradd's own rule, kept short).
NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,30}$")
HUB = "jupyterhub"
#: The hub's service that krmcourse itself talks to the hub's REST API as (adding and removing learners).
SERVICE = "krmcourse"
READY = "JupyterHub is now running at"
#: The hub's service that shows the instructor the room (krmcourse.roomview), at /services/room/.
VIEW = "room"
#: The hub's service that stops idle learners' servers (jupyterhub-idle-culler).
CULLER = "idle-culler"
#: Marks the hub's services' processes with the hub's folder, so that what a killed hub left is found.
ROOM_ENV = "KRMCOURSE_ROOM"
ROOT_HINT = "Run it as root (sudo krmcourse hub ...): it makes Unix accounts, and the hub runs each learner's " \
            "JupyterLab as that learner."


class HubError(KrmcourseError):
    """The room's hub could not be set up, started or stopped (exit code 8)."""

    exit_code = 8


# ----------------------------------------------------------------- where things are
def hub_dir() -> Path:
    """The hub's own state: database, secrets, passwords, logs, the room's record."""
    return state_dir() / "hub"


def downloads_dir() -> Path:
    """What ``prepare`` fetches: the wheelhouse and the proxy."""
    return cache_dir() / "hub"


def wheelhouse() -> Path:
    return downloads_dir() / "wheelhouse"


def proxy_command() -> Path:
    return downloads_dir() / "proxy" / "node_modules" / ".bin" / "configurable-http-proxy"


def default_prefix() -> Path:
    return Path(os.environ.get("KRMCOURSE_HUB_PREFIX") or DEFAULT_PREFIX)


@dataclass
class Room:
    """The room's record, kept in ``hub_dir()/room.json``: who the learners are and where things are."""

    prefix: str
    homes: str
    learner_prefix: str
    admin: str
    learners: list[str] = field(default_factory=list)
    max_labs: int = 3
    port: int = 0
    hub_port: int = 0
    api_port: int = 0
    view_port: int = 0
    #: Seconds a learner's server may sit idle before the culler stops it (z2jh's default).
    idle_timeout: int = 3600

    @property
    def venv(self) -> Path:
        return Path(self.prefix) / "venv"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    @property
    def accounts(self) -> list[str]:
        return [*self.learners, self.admin]

    def save(self) -> None:
        private_file(hub_dir() / "room.json", json.dumps(asdict(self), indent=2))

    @staticmethod
    def load() -> Room | None:
        try:
            return Room(**json.loads((hub_dir() / "room.json").read_text()))
        except FileNotFoundError:
            return None


def learner_names(prefix: str, count: int, first: int = 1) -> list[str]:
    return [f"{prefix}{i:02d}" for i in range(first, first + count)]


# ----------------------------------------------------------------- downloads (./course install)
def requirements() -> list[str]:
    """What the shared venv needs: the course's own dependencies and its ``hub`` extra (JupyterHub), read
    from the installed package's metadata, plus what installing the course from its copy needs."""
    wanted = []
    for requirement in metadata.requires("krmcourse") or []:
        spec, _, marker = requirement.partition(";")
        if not marker or re.search(r"""extra\s*==\s*["']hub["']""", marker):
            wanted.append(spec.strip())
    return [*wanted, "setuptools>=77", "wheel"]


def prepare(say: Say = print, python: str = DEFAULT_PYTHON) -> None:
    """Fetch what a hub needs from PyPI and npm, so that ``hub start`` reaches no registry: every wheel
    of the shared venv into the wheelhouse, and the proxy into the cache. Idempotent and quick when done.

    The wheels are chosen by ``python``'s own pip (in a scratch venv), the Python the shared venv is
    made with: a newer Python (the project's venv) would pick releases that need a newer patch level.
    """
    version = _run([python, "-c", "import sys; print(sys.version.split()[0])"], f"{python} does not run",
                   "Install Python 3.11 or newer, or pass --python.").stdout.strip()
    wanted = f"{python} {version}\n" + "\n".join(requirements()) + "\n"
    stamp = wheelhouse() / ".requirements"
    if not (stamp.is_file() and stamp.read_text() == wanted):
        say(f"== hub: wheels for the shared environment ({python}, Python {version}) into {wheelhouse()}")
        wheelhouse().mkdir(parents=True, exist_ok=True)
        builder = downloads_dir() / "builder"
        shutil.rmtree(builder, ignore_errors=True)
        _run([python, "-m", "venv", str(builder)], f"{python} -m venv failed",
             "Install the system's venv module (Debian: apt-get install python3-venv), or pass --python.")
        try:
            _run([str(builder / "bin" / "python"), "-m", "pip", "wheel", "--quiet", "-w", str(wheelhouse()),
                  *requirements()],
                 "Fetching the hub's wheels failed", "It needs PyPI: check the network (or a proxy), then run "
                 "'krmcourse hub prepare' again.")
        finally:
            shutil.rmtree(builder, ignore_errors=True)
        stamp.write_text(wanted)
    if not proxy_command().exists():
        npm = shutil.which("npm")
        if npm is None:
            raise HubError("npm is not installed, and the hub's proxy (configurable-http-proxy) comes from npm.",
                           "Install Node.js and npm (Debian: apt-get install nodejs npm), then run "
                           "'krmcourse hub prepare' again.")
        say(f"== hub: {PROXY_PACKAGE} into {proxy_command().parents[2]}")
        _run([npm, "install", "--prefix", str(proxy_command().parents[2]), "--no-audit", "--no-fund",
              "--loglevel=error", PROXY_PACKAGE],
             "Installing configurable-http-proxy from npm failed", "Check the network (or npm's proxy settings), "
             "then run 'krmcourse hub prepare' again.")


def _run(argv: list[str], what: str, hint: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    if done.returncode != 0:
        raise HubError(f"{what} (exit {done.returncode}): {(done.stderr or done.stdout).strip()[-2000:]}", hint)
    return done


# ----------------------------------------------------------------- the shared environment
def repository() -> Path:
    return Path(__file__).resolve().parent.parent


def _course_key() -> str:
    """What the shared environment was made from: the requirements, the wheels and the course's files."""
    files = []
    for name in COURSE_FILES:
        top = repository() / name
        for path in sorted(top.rglob("*")) if top.is_dir() else [top]:
            if path.is_file() and "__pycache__" not in path.parts:
                stat = path.stat()
                files.append(f"{path.relative_to(repository())} {stat.st_size} {stat.st_mtime_ns}")
    wheels = sorted(p.name for p in wheelhouse().glob("*.whl"))
    return json.dumps([requirements(), wheels, files])


def _safe_prefix(prefix: Path) -> Path:
    """``prefix``, made if missing, once it and every folder above it are root's and writable by nobody
    else (a sticky folder such as /tmp excepted, above it): root runs the hub from it."""
    prefix = prefix.absolute()
    prefix.mkdir(parents=True, exist_ok=True)
    for folder in [prefix, *prefix.parents]:
        info = folder.lstat()
        open_to_others = info.st_mode & 0o022 and not (folder != prefix and info.st_mode & stat.S_ISVTX)
        if stat.S_ISLNK(info.st_mode) or info.st_uid != 0 or open_to_others:
            raise HubError(f"{folder} is not root's alone, and root would run the hub from {prefix}.",
                           "Choose a --prefix in folders only root can write to (the default is /opt/krmcourse).")
    return prefix


def shared_environment(prefix: Path, say: Say = print, python: str = DEFAULT_PYTHON) -> Path:
    """Make (or bring up to date) the read-only environment every learner runs: the course's copy,
    its venv, and the lab toolchain. Returns the venv. Needs no registry: the wheels come from
    :func:`wheelhouse`."""
    if not (wheelhouse() / ".requirements").is_file() or not proxy_command().exists():
        raise HubError(f"The hub's downloads are not in {downloads_dir()}.",
                       "Run 'krmcourse hub prepare' (./course install does it) while PyPI and npm are reachable.")
    venv, stamp = prefix / "venv", prefix / ".krmcourse-hub"
    key = _course_key()
    prefix.mkdir(parents=True, exist_ok=True)
    os.chmod(prefix, 0o755)
    if not (stamp.is_file() and stamp.read_text() == key and (venv / "bin" / HUB).exists()):
        _build(prefix, python, say)
        stamp.write_text(key)
    _shared_locks()
    return venv


def _build(prefix: Path, python: str, say: Say) -> None:
    venv, course = prefix / "venv", prefix / "course"
    started = time.monotonic()
    say(f"== hub: the shared course environment in {prefix} (the course, its venv, the lab toolchain)")
    if course.resolve() != repository():
        shutil.rmtree(course, ignore_errors=True)
        for name in COURSE_FILES:
            source = repository() / name
            if source.is_dir():
                shutil.copytree(source, course / name, ignore=NOT_COPIED)
            elif source.is_file():
                shutil.copy2(source, course / name)
    if not (venv / "bin" / "python").exists():
        _run([python, "-m", "venv", str(venv)], f"{python} -m venv failed",
             "Install the system's venv module (Debian: apt-get install python3-venv), or pass --python.")
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-index",
           "--find-links", str(wheelhouse())]
    hint = "Run 'krmcourse hub prepare' again (it fetches what is missing), then start the hub again."
    _run([*pip, *requirements()], "Installing the course's packages into the shared venv failed", hint)
    _run([*pip, "--no-build-isolation", "--no-deps", "-e", str(course)],
         "Installing the course into the shared venv failed", hint)
    _run([str(venv / "bin" / "python"), "-c", "from krmcourse.jupyter import install_settings; install_settings()"],
         "Writing the course's Jupyter settings into the shared venv failed", hint)
    _copy_toolchain(prefix / "cache" / "toolchain")  # (hard links: their modes are the cache's own)
    _readable(course)
    _readable(venv)
    say(f"   made in {time.monotonic() - started:.0f} s")


def _copy_toolchain(target: Path) -> None:
    """The lab control plane's binaries, where learners can read them: hard links when the cache is on
    the same file system (instant, no space), else copies."""
    missing = toolchain.missing("kwok")
    if missing:
        raise HubError(f"The lab toolchain is not built: {', '.join(missing)}.",
                       "Run 'krmcourse toolchain install' (./course install does it), then start the hub again.")
    for component in toolchain.COMPONENTS:
        destination = target / component.folder.name
        if destination.is_dir():
            continue
        scratch = destination.with_name(destination.name + ".new")
        shutil.rmtree(scratch, ignore_errors=True)
        try:
            shutil.copytree(component.folder, scratch, copy_function=os.link)
        except OSError:
            shutil.rmtree(scratch, ignore_errors=True)
            shutil.copytree(component.folder, scratch)
        scratch.rename(destination)


#: The lock files every user's clusters share, the learners' and root's (see :func:`krmcourse.paths.locks_dir`).
SHARED_LOCKS = (PORTS_LOCK,)


def _shared_locks() -> None:
    """The shared lock files, made by root and readable (so lockable) by all. In a sticky folder such as
    ``/tmp``, a file root owns cannot be removed or replaced by a learner; one a learner made before the
    hub started is replaced (a holder of the old one finds it gone and locks the new: see ``file_lock``)."""
    folder = locks_dir()
    folder.mkdir(parents=True, exist_ok=True)
    for name in SHARED_LOCKS:
        _own_lock_file(folder / name)


def _own_lock_file(path: Path) -> None:
    """``path`` as a file root owns, mode 0644: one a learner made is removed and made again, with
    ``O_EXCL``, so a learner who makes it again in between only sends the loop round once more."""
    while True:
        try:
            if os.stat(path).st_uid == 0:
                os.chmod(path, 0o644)
                return
            path.unlink()
        except FileNotFoundError:
            pass
        if (fd := create_readable(path)) is not None:
            os.close(fd)
            return
        # a learner made it again just now


def _readable(top: Path) -> None:
    """Every file under ``top`` readable by all, and every folder (and program) enterable, none writable
    but by root."""
    for folder, dirs, files in os.walk(top):
        for name in dirs:
            path = Path(folder) / name
            os.chmod(path, 0o755)
        for name in files:
            path = Path(folder) / name
            if not path.is_symlink():
                mode = path.stat().st_mode
                os.chmod(path, 0o755 if mode & 0o100 else 0o644)


# ----------------------------------------------------------------- accounts
def require_root() -> None:
    if os.geteuid() != 0:
        raise HubError("krmcourse hub needs root.", ROOT_HINT)


def check_name(name: str) -> str:
    if not NAME.match(name):
        raise UsageError(f"{name!r} is not a usable account name.",
                         "Use lowercase letters, digits, '-' and '_', starting with a letter, at most 31 characters.")
    return name


#: The lowest uid of an ordinary account (Debian's UID_MIN): the room never signals, nor removes, a system
#: account or root, whatever room.json says.
UID_MIN = 1000


def require_ordinary(name: str) -> None:
    try:
        uid = pwd.getpwnam(name).pw_uid
    except KeyError:
        return
    if uid < UID_MIN:
        raise HubError(f"{name} is a system account (uid {uid}); the room only acts on accounts it made.",
                       f"Check {hub_dir() / 'room.json'}: it should list only the room's learners and admin.")


def account_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def passwords_file() -> Path:
    return hub_dir() / "passwords.txt"


def _passwords() -> dict[str, str]:
    try:
        lines = passwords_file().read_text().splitlines()
    except FileNotFoundError:
        return {}
    return dict(line.split(" ", 1) for line in lines if " " in line)


def _write_passwords(passwords: dict[str, str]) -> None:
    private_file(passwords_file(), "".join(f"{name} {pw}\n" for name, pw in passwords.items()))


def create_account(name: str, room: Room, notebooks: bool = True) -> None:
    """A Unix account with its own home (mode 0700), a random password (kept in :func:`passwords_file`)
    and, for a learner, a copy of the course's notebooks in ``~/notebooks``."""
    check_name(name)
    if account_exists(name):
        raise HubError(f"An account named {name} exists already, and this room did not make it.",
                       "Choose another name (or another --prefix for the learners' names).")
    homes = Path(room.homes)
    homes.mkdir(parents=True, exist_ok=True)
    _run(["useradd", "--create-home", "--base-dir", str(homes), "--shell", "/bin/bash", "--user-group",
          "--comment", "krmcourse learner", name], f"useradd {name} failed",
         "Read useradd's message above; 'krmcourse hub status' lists the room's accounts.")
    account = pwd.getpwnam(name)
    home = Path(account.pw_dir)
    # useradd keeps a home that was there before: root writes into it only if it is the new account's.
    info = home.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != account.pw_uid or (home / "notebooks").exists():
        subprocess.run(["userdel", name], capture_output=True)  # the account only: the folder is not its own
        raise HubError(f"{home} was there before {name} was made (or is not a folder of theirs).",
                       "Move it away, or choose another --homes, then try again.")
    try:
        os.chmod(home, 0o700)
        password = secrets.token_urlsafe(12)
        _run(["chpasswd"], f"Setting {name}'s password failed", "Read chpasswd's message above.",
             input=f"{name}:{password}\n")
        _write_passwords({**_passwords(), name: password})
        if notebooks:
            copy = home / "notebooks"
            shutil.copytree(Path(room.prefix) / "course" / "notebooks", copy, ignore=NOT_COPIED)
            for path in [copy, *copy.rglob("*")]:
                os.chown(path, account.pw_uid, account.pw_gid, follow_symlinks=False)
    except BaseException:
        # Never half-made: an account without its password or notebooks would be refused later as not the room's.
        subprocess.run(["userdel", "--remove", name], capture_output=True)
        raise


def remove_account(name: str, room: Room) -> None:
    """Stop everything the account runs (its lab clusters first, cleanly), then remove it and its home."""
    if account_exists(name):
        require_ordinary(name)
        stop_labs(name, room)
        kill_processes_of(name)
        _run(["userdel", "--remove", name], f"userdel {name} failed",
             "Read userdel's message above; 'ps -u NAME' shows what still runs as the account.")
    passwords = _passwords()
    passwords.pop(name, None)
    _write_passwords(passwords)


def learner_env(name: str, room: Room) -> dict[str, str]:
    home = pwd.getpwnam(name).pw_dir
    return {"HOME": home, "USER": name, "LOGNAME": name, "PATH": _learner_path(room),
            "LANG": "C.UTF-8", **_course_env(room)}


def _learner_path(room: Room) -> str:
    """A learner's PATH: the shared venv first (krmcourse, jupyter, kubectl), then the system's."""
    return f"{room.venv / 'bin'}:/usr/local/bin:/usr/bin:/bin"


def _course_env(room: Room) -> dict[str, str]:
    """Where a learner's krmcourse finds the shared toolchain and the ports lock (root's own: see
    ``_shared_locks``), and how many lab clusters each learner may keep up at once."""
    return {"KRMCOURSE_CACHE": str(Path(room.prefix) / "cache"), "KRMCOURSE_LOCKS": str(locks_dir()),
            MAX_LABS_ENV: str(room.max_labs)}


def learner_state(name: str) -> Path:
    """Where a learner's krmcourse keeps their lab clusters and the checks' results (their KRMCOURSE_HOME)."""
    return Path(pwd.getpwnam(name).pw_dir) / ".local" / "state" / "krmcourse"


def learner_files(name: str) -> set[str]:
    """A learner's own files: every file of their home, relative to it, except krmcourse's state (which
    ``down`` is meant to remove). A stop, a cull or a reset must lose none of them."""
    home = Path(pwd.getpwnam(name).pw_dir)
    state = learner_state(name)
    return {str(p.relative_to(home)) for p in home.rglob("*") if p.is_file() and not p.is_relative_to(state)}


def as_learner(name: str, room: Room, *args: str) -> list[str]:
    """The command line that runs ``krmcourse ARGS`` as a learner, in the environment their JupyterLab
    gives them (their home, the shared venv, toolchain and locks): what the hub's hooks and the
    instructor's view run."""
    return ["runuser", "-u", name, "--", "env", "-i", *(f"{k}={v}" for k, v in learner_env(name, room).items()),
            str(room.venv / "bin" / "krmcourse"), *args]


def stop_labs(name: str, room: Room) -> str:
    """Take down every lab cluster of one learner, as that learner (``krmcourse down --all``)."""
    if not account_exists(name) or not (room.venv / "bin" / "krmcourse").exists():
        return ""
    done = subprocess.run(as_learner(name, room, "down", "--all"), capture_output=True, text=True, cwd="/",
                          stdin=subprocess.DEVNULL, start_new_session=True)
    return done.stdout + done.stderr


def processes_of(name: str) -> list[psutil.Process]:
    try:
        uid = pwd.getpwnam(name).pw_uid
    except KeyError:
        return []
    found = []
    for proc in psutil.process_iter(["uids"]):
        uids = proc.info["uids"]
        if uids is not None and uid in (uids.real, uids.effective):
            found.append(proc)
    return found


def kill_processes_of(name: str, timeout: float = 15) -> None:
    """SIGTERM every process of one of the room's accounts, SIGKILL what is left after ``timeout``.

    A process may start another while it is being stopped (a shell, a server's kernel): look again, and
    kill what appeared, until the account runs nothing.
    """
    require_ordinary(name)
    procs = processes_of(name)
    for proc in procs:
        _signal(proc, "terminate")
    _, alive = psutil.wait_procs(procs, timeout=timeout)
    for _ in range(10):
        alive = [p for p in {*alive, *processes_of(name)} if _alive(p)]
        if not alive:
            return
        for proc in alive:
            _signal(proc, "kill")
        psutil.wait_procs(alive, timeout=10)
    raise HubError(f"{name} still runs {', '.join(_command(p) for p in processes_of(name) if _alive(p))} after "
                   "ten rounds of SIGKILL.", f"See what forks them ('ps -u {name} -f'), then try again.")


def listening(pids: list[int]) -> set[tuple[str, int]]:
    """Every (address, port) the processes listen on: for checking that the room's are on loopback only,
    and gone after a stop."""
    found = set()
    for pid in pids:
        try:
            connections = psutil.Process(pid).net_connections(kind="inet")
        except psutil.Error:
            continue
        found |= {(c.laddr.ip, c.laddr.port) for c in connections if c.status == psutil.CONN_LISTEN}
    return found


def _signal(proc: psutil.Process, how: str) -> None:
    try:
        getattr(proc, how)()
    except psutil.Error:
        pass


# ----------------------------------------------------------------- the hub's configuration
def configure(c: Any, folder: Path) -> None:
    """Fill JupyterHub's configuration ``c`` for the room recorded in ``folder``: what the
    ``jupyterhub_config.py`` written by :func:`start` calls."""
    room = room_in(folder)
    c.JupyterHub.bind_url = room.url
    c.JupyterHub.hub_bind_url = f"http://127.0.0.1:{room.hub_port}"
    c.JupyterHub.db_url = f"sqlite:///{folder / 'jupyterhub.sqlite'}"
    c.JupyterHub.cookie_secret_file = str(folder / "jupyterhub_cookie_secret")
    c.JupyterHub.cleanup_servers = True
    c.JupyterHub.cleanup_proxy = True
    c.ConfigurableHTTPProxy.command = [str(proxy_command())]
    c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{room.api_port}"
    c.ConfigurableHTTPProxy.auth_token = (folder / "proxy_token").read_text().strip()
    c.ConfigurableHTTPProxy.pid_file = str(folder / "proxy.pid")
    c.ConfigurableHTTPProxy.should_start = True
    c.JupyterHub.authenticator_class = "jupyterhub.auth.PAMAuthenticator"
    c.PAMAuthenticator.open_sessions = False  # no login session (pam_loginuid and friends): a server is no login
    c.Authenticator.allowed_users = set(room.learners)
    c.Authenticator.admin_users = {room.admin}
    c.JupyterHub.services = [{"name": SERVICE, "api_token": (folder / "api_token").read_text().strip()},
                             *_managed_services(room, folder)]
    c.JupyterHub.load_roles = [
        # access:servers: the service may also ask a learner's JupyterLab (its REST API: kernels), as the
        # room's benchmark does (see server_api).
        {"name": "krmcourse-room", "services": [SERVICE],
         "scopes": ["admin:users", "admin:servers", "list:users", "read:users", "access:servers"]},
        # Every user may reach the view (it shows a learner only their own row; admins have access:services).
        {"name": "user", "scopes": ["self", f"access:services!service={VIEW}"]},
        # What jupyterhub-idle-culler's documentation asks for, to cull servers and not users.
        {"name": CULLER, "services": [CULLER],
         "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"]},
    ]
    c.JupyterHub.spawner_class = "jupyterhub.spawner.LocalProcessSpawner"
    c.Spawner.cmd = [str(room.venv / "bin" / "jupyterhub-singleuser")]
    c.Spawner.ip = "127.0.0.1"
    c.Spawner.default_url = "/lab"
    c.Spawner.notebook_dir = "~/notebooks"
    c.Spawner.start_timeout = 180
    c.Spawner.http_timeout = 180
    # The provider and whether notebooks apply their solutions come from the instructor's environment;
    # KRMCOURSE_HOME does not: each learner's state is under their own home.
    c.Spawner.env_keep = ["LANG", "LC_ALL", "KRMCOURSE_PROVIDER", "KRMCOURSE_SOLUTIONS"]
    c.Spawner.environment = {"PATH": _learner_path(room), **_course_env(room)}
    c.Spawner.pre_spawn_hook = _learners_only(folder)
    c.Spawner.post_stop_hook = _stop_labs_hook(folder)


def _managed_services(room: Room, folder: Path) -> list[dict[str, Any]]:
    """The instructor's view and the idle culler, which the hub starts and stops with itself, as root (the
    view reads every learner's state and runs resets as them). Both are marked with :data:`ROOM_ENV`, so
    that what a killed hub left is found (see :func:`_clean_up`)."""
    python = str(room.venv / "bin" / "python")
    env = {ROOM_ENV: str(folder), **{k: v for k, v in os.environ.items() if k == "KRMCOURSE_PROVIDER"}}
    cull_every = min(600, max(1, room.idle_timeout // 2))
    return [
        {"name": VIEW, "url": f"http://127.0.0.1:{room.view_port}", "oauth_no_confirm": True,
         "command": [python, "-m", "krmcourse.roomview", str(folder)], "environment": env},
        {"name": CULLER, "environment": env,
         "command": [python, "-m", "jupyterhub_idle_culler", f"--timeout={room.idle_timeout}",
                     f"--cull-every={cull_every}"]},
    ]


def room_in(folder: Path) -> Room:
    """The room as recorded now: learners added or removed while the hub runs included."""
    return Room(**json.loads((folder / "room.json").read_text()))


def _learners_only(folder: Path) -> Callable[[Any], None]:
    """Only the room's learners get a server: the spawner runs it as that Unix account, so a user an admin
    added in the hub's pages (root, say) must not get one, nor the admin, who has no notebooks."""

    def check(spawner: Any) -> None:
        name = spawner.user.name
        if name not in room_in(folder).learners or not account_exists(name) or pwd.getpwnam(name).pw_uid < UID_MIN:
            raise HubError(f"{name} is not one of this room's learners, and gets no server.",
                           "Add them with 'krmcourse hub add-learner NAME'.")

    return check


def _stop_labs_hook(folder: Path) -> Callable[[Any], Any]:
    """When a learner's server stops, for whatever reason, their lab clusters stop too."""

    async def stop_labs_of(spawner: Any) -> None:
        import asyncio

        room, name = room_in(folder), spawner.user.name
        if name in room.learners:
            await asyncio.get_running_loop().run_in_executor(None, stop_labs, name, room)

    return stop_labs_of


CONFIG = '''"""JupyterHub's configuration for a krmcourse room, written by 'krmcourse hub start'."""
from pathlib import Path

from krmcourse.hub import configure

configure(c, Path({folder!r}))  # noqa: F821 - c is JupyterHub's configuration object
'''


# ----------------------------------------------------------------- start, stop, status
def running_hub() -> int | None:
    return live_processes(hub_dir()).get(HUB)


def start(learners: int, prefix: Path | None = None, homes: Path | None = None, port: int | None = None,
          learner_prefix: str = "learner", admin: str | None = None, python: str = DEFAULT_PYTHON,
          max_labs: int = 3, idle_timeout: int = 3600, say: Say = print) -> Room:
    """Set up the room (accounts, shared environment) and start the hub; return the room's record."""
    require_root()
    if idle_timeout < 1:
        raise UsageError(f"--idle-timeout {idle_timeout}: a learner's server needs some seconds before it is "
                         "culled.", "Use --idle-timeout SECONDS, at least 1 (the default is 3600, an hour).")
    if max_labs < 1:
        raise UsageError(f"--max-labs {max_labs}: a learner needs at least one lab cluster.",
                         "Use --max-labs 1 or more.")
    if learners < 1:
        raise UsageError(f"--learners {learners}: a room needs at least one learner.", "Use --learners N, N >= 1.")
    check_name(learner_prefix + "00")
    folder = hub_dir()
    if (pid := running_hub()) is not None:
        room = Room.load()
        raise HubError(f"The hub is running already (pid {pid}){f' at {room.url}' if room else ''}.",
                       "Use it, or stop it first with 'krmcourse hub stop'.")
    if port is not None:
        try:
            require_free_port(port)
        except PortInUseError as error:
            raise PortInUseError(error.message, "Choose another port with --port, or leave --port out and the hub "
                                                "picks a free one (it prints its address).") from error
    previous = Room.load()
    if previous is not None and (killed := _clean_up(previous)):
        # Never half: the servers of a hub that died would point at its old address.
        say(f"The room's last hub stopped without cleaning up (killed, or the machine restarted); stopped what it "
            f"left running: {'; '.join(killed)}")
    admin = check_name(admin or f"{learner_prefix}admin")
    if previous is None and account_exists(admin):
        raise HubError(f"An account named {admin} exists already: the room's admin must be an account it makes.",
                       "Choose another name with --admin.")
    prefix = _safe_prefix(prefix or (Path(previous.prefix) if previous else default_prefix()))
    venv = shared_environment(prefix, say, python)
    room = previous or Room(prefix=str(prefix), homes=str(homes or "/home"), learner_prefix=learner_prefix,
                            admin=admin)
    room.prefix = str(prefix)
    room.max_labs, room.idle_timeout = max_labs, idle_timeout
    ports = free_ports(4)
    room.port, room.hub_port, room.api_port, room.view_port = port or ports[0], ports[1], ports[2], ports[3]
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    room.save()
    wanted = learner_names(room.learner_prefix, learners)
    for name in [n for n in [room.admin, *wanted] if n not in room.accounts or not account_exists(n)]:
        create_account(name, room, notebooks=name != room.admin)
        if name != room.admin:
            room.learners.append(name)
        room.save()
    for file in ("proxy_token", "api_token"):
        if not (folder / file).exists():
            private_file(folder / file, secrets.token_hex(32))
    (folder / "jupyterhub_config.py").write_text(CONFIG.format(folder=str(folder)))
    # The hub's own PATH has the system's programs too: runuser (the post-stop hook), useradd.
    env = {"PATH": f"{venv / 'bin'}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
           "HOME": str(Path.home()), "LANG": "C.UTF-8",
           **{k: v for k, v in os.environ.items()
              if k in ("KRMCOURSE_PROVIDER", "KRMCOURSE_SOLUTIONS", "KRMCOURSE_CACHE", "XDG_CACHE_HOME")}}
    hub = ManagedProcess(HUB, [str(venv / "bin" / HUB), "-f", str(folder / "jupyterhub_config.py")], env, folder,
                         cwd=folder).start()
    try:
        hub.wait_for_log(READY, timeout=180)
    except (KrmcourseError, RuntimeError) as error:
        stop(say=say)
        raise HubError(f"JupyterHub did not start: {error}",
                       f"Its log is {hub.log_path}; fix what it says, then 'krmcourse hub start' again.") from error
    say(f"The hub is running at {room.url} (on 127.0.0.1 only).")
    say(f"The instructor's view of the room: {room.url}services/{VIEW}/ (log in as {room.admin}). Idle "
        f"learners' servers, and their lab clusters, stop after {room.idle_timeout} s (--idle-timeout).")
    say(f"Learners: {', '.join(room.learners)}; admin: {room.admin}. Their passwords are in {passwords_file()} "
        "(only root can read it).")
    say("Add a learner: krmcourse hub add-learner NAME; remove one (stops their server and clusters): "
        "krmcourse hub remove-learner NAME; stop everything: krmcourse hub stop.")
    return room


def service_token() -> str:
    """The room's service's API token (root's only): for the hub's REST API and, as the service may access
    servers, each learner's JupyterLab."""
    return (hub_dir() / "api_token").read_text().strip()


def api(room: Room, method: str, path: str) -> tuple[int, Any]:
    """Ask the hub's REST API, as the room's service."""
    return _ask(room, f"{room.url}hub/api/{path}", method)


def server_api(room: Room, name: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """Ask a learner's JupyterLab REST API (``api/kernels``, say) through the hub's proxy, as the room's service."""
    return _ask(room, f"{room.url}user/{name}/api/{path}", method, body)


def _ask(room: Room, url: str, method: str, body: Any = None) -> tuple[int, Any]:
    headers = {"Authorization": f"token {service_token()}"}
    if body is not None:
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(url, method=method, headers=headers,
                                     data=None if body is None else json.dumps(body).encode())
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            status, body = answer.status, answer.read()
    except urllib.error.HTTPError as error:
        status, body = error.code, error.read()
    except OSError as error:  # refused, reset, timed out
        raise HubError(f"The hub at {room.url} did not answer ({error}).",
                       "'krmcourse hub status' says whether it runs; 'krmcourse hub start' starts it again.") from error
    try:
        return status, json.loads(body) if body else None
    except ValueError:
        return status, None


def _room() -> Room:
    room = Room.load()
    if room is None:
        raise HubError(f"No room has been set up here ({hub_dir()} has no room.json).",
                       "Start one with 'krmcourse hub start --learners N'.")
    return room


def add_learner(name: str, say: Say = print) -> None:
    require_root()
    room = _room()
    if name in room.accounts:
        raise UsageError(f"{name} is in the room already.", "'krmcourse hub status' lists the learners.")
    create_account(name, room)
    room.learners.append(name)
    room.save()
    if running_hub() is not None:
        status, body = api(room, "POST", f"users/{name}")
        if status not in (201, 409):
            raise HubError(f"The hub refused to add {name} ({status}: {body}).",
                           "The account exists; 'krmcourse hub stop' then 'start' makes the hub read the room again.")
    say(f"Added {name}; the password is in {passwords_file()}.")


def remove_learner(name: str, say: Say = print) -> None:
    require_root()
    room = _room()
    if name not in room.learners:
        raise UsageError(f"{name} is not one of this room's learners.", "'krmcourse hub status' lists them.")
    if running_hub() is not None:
        stop_server(room, name)
        api(room, "DELETE", f"users/{name}")
    remove_account(name, room)
    room.learners.remove(name)
    room.save()
    say(f"Removed {name}: their server, lab clusters, account and home are gone.")


def stop_server(room: Room, name: str, timeout: float = 120) -> None:
    """Ask the hub to stop a learner's server, and wait until it has: the hub answers 202 while the
    server is still stopping, and refuses to delete a user whose stop is pending."""
    status, body = api(room, "DELETE", f"users/{name}/server")
    if status not in (202, 204, 400, 404):  # 400: no server was running
        raise HubError(f"The hub refused to stop {name}'s server ({status}: {body}).",
                       "'krmcourse hub stop' stops every server and lab cluster.")

    def stopped() -> bool:
        status, user = api(room, "GET", f"users/{name}")
        return status == 404 or not (user or {}).get("pending") and not (user or {}).get("servers")

    Lab.wait_until(stopped, timeout=timeout, interval=0.5, message=f"{name}'s server did not stop",
                   hint="'krmcourse hub stop' stops every server and lab cluster.")


def stop(remove_accounts: bool = False, say: Say = print) -> list[str]:
    """Stop the hub (it stops its proxy and every learner's server), every learner's lab clusters, and
    anything else the room's accounts still run. Returns what was still running and had to be killed."""
    require_root()
    room = Room.load()
    if room is None:
        say("No room has been set up here: nothing to stop.")
        return []
    folder = hub_dir()
    if stop_recorded(folder, HUB, timeout=60):
        say("Stopped JupyterHub (and, with it, its proxy and the learners' servers).")
    killed = _clean_up(room)
    if remove_accounts:
        for name in list(room.accounts):
            remove_account(name, room)
        (folder / "room.json").unlink(missing_ok=True)
        passwords_file().unlink(missing_ok=True)
        say(f"Removed the room's accounts: {', '.join(room.accounts)}.")
    return killed


def _clean_up(room: Room) -> list[str]:
    """Stop what is left of the room once its hub has gone: the proxy, and every account's lab clusters
    (cleanly, as the learner) and other processes. Returns what was running and had to be killed."""
    killed = []
    proxy = proxy_pid()
    if proxy is not None:
        killed.append(f"the proxy (pid {proxy})")
        _signal(psutil.Process(proxy), "kill")
    for service in services_left():
        killed.append(f"the hub's service {_command(service)}")
        _signal(service, "kill")
    for name in room.accounts:
        if not processes_of(name):
            continue  # nothing of theirs runs (their clusters' processes would be theirs)
        stop_labs(name, room)
        killed += [f"{name}: {_command(p)}" for p in processes_of(name) if _alive(p)]
        kill_processes_of(name)
    return killed


def services_left() -> list[psutil.Process]:
    """The processes of this room's hub services (the view, the culler) that still run."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get(ROOM_ENV) == str(hub_dir()) and _alive(proc):
                found.append(proc)
        except psutil.Error:  # gone meanwhile, or a process root cannot read (a kernel thread)
            continue
    return found


def _command(proc: psutil.Process) -> str:
    try:
        return " ".join(proc.cmdline())[:100]
    except psutil.Error:
        return f"pid {proc.pid} (exited)"


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def proxy_pid() -> int | None:
    """The running hub's proxy, if it runs."""
    return _recorded_pid(hub_dir() / "proxy.pid")


def _recorded_pid(path: Path) -> int | None:
    """The proxy's pid from the pid file JupyterHub writes, if that process is still the proxy."""
    try:
        pid = int(path.read_text().strip())
        running = "configurable-http-proxy" in " ".join(psutil.Process(pid).cmdline())
    except (OSError, ValueError, psutil.Error):
        return None
    return pid if running else None


def status(say: Say = print) -> bool:
    """Say whether the hub runs, where, and each learner's server; True when it runs."""
    room = Room.load()
    if room is None:
        say("No room has been set up here. Start one with 'krmcourse hub start --learners N'.")
        return False
    pid = running_hub()
    say(f"hub: {f'running (pid {pid}) at {room.url}' if pid else 'stopped'}; shared environment "
        f"{room.prefix}; passwords in {passwords_file()}")
    servers: dict[str, str] = {}
    if pid is not None:
        code, users = api(room, "GET", "users")
        if code == 200 and isinstance(users, list):
            servers = {u["name"]: ("running" if u.get("server") else "stopped") for u in users}
    for name in room.learners:
        state = servers.get(name, "no server") if pid else "-"
        labs = len(_clusters_of(name))
        say(f"{name:<16} server {state:<10} lab clusters {labs}")
    return pid is not None


def _clusters_of(name: str) -> list[Path]:
    try:
        clusters = learner_state(name) / "kwok" / "clusters"  # the hub runs labs on kwok
    except KeyError:
        return []
    return [p for p in clusters.iterdir() if p.is_dir()] if clusters.is_dir() else []


def labs_up(name: str) -> list[str]:
    """The labs a learner has a cluster of (its first instance), in no particular order."""
    return [p.name.removeprefix("krm-") for p in _clusters_of(name) if p.name.startswith("krm-")]
