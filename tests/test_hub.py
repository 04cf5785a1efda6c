"""A real JupyterHub for a room (``krmcourse hub``): learner accounts, PAM logins in Chromium, each
learner's JupyterLab and lab clusters under their own account, and nothing left after ``hub stop``.

The test runs the instructor's command as root: it makes Unix accounts with names of its own
(``kh<random>l01`` ...), their homes and the shared course environment in a folder of its own under
/tmp, and removes all of them at the end, failed or not. Three learners log in one after the other
and each runs ``00-welcome.ipynb`` through "Run All Cells": each brings up a lab cluster of their own.
See tests/README.md, "The hub test".
"""

from __future__ import annotations

import json
import os
import pwd
import re
import secrets
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import psutil
import pytest
from browser import notebooks as nbs
from browser import pages
from browser.servers import ROOT

from krmcourse import Lab, hub
from krmcourse.providers.base import flags_of

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Locator, Page

pytestmark = [pytest.mark.hub, pytest.mark.cluster]

LEARNERS = 3
#: Each learner's limit on lab clusters, low so that the test meets it with one more.
MAX_LABS = 1
NOTEBOOK = "00-welcome.ipynb"
#: Running a whole notebook on a busy two-core machine: the timeout only guards against a hang.
RUN_MS = 1_500_000
#: What the instructor's command prints, for the learners to open.
ADDRESS = re.compile(r"The hub is running at (http://127\.0\.0\.1:(\d+)/)")


@dataclass
class MadeRoom:
    """The room the test made: its accounts and where everything is."""

    url: str
    base: Path
    learners: list[str]
    admin: str
    passwords: dict[str, str]
    uids: dict[str, int]
    #: Every port something of the room listened on, for the check after stop.
    ports: set[int] = field(default_factory=set)
    output: str = ""
    #: The instructor's ``hub start`` arguments.
    start: list[str] = field(default_factory=list)

    @property
    def record(self) -> hub.Room:
        room = hub.Room.load()
        assert room is not None, f"no room.json in {hub.hub_dir()}"
        return room


@dataclass
class LearnerServer:
    """One learner's JupyterLab behind the hub, as :mod:`browser.pages` addresses a server (its pages
    are reached with the login cookie the browser holds, not a token)."""

    room: MadeRoom
    name: str
    log: Path

    def url(self, path: str = "lab") -> str:
        return f"{self.room.url}user/{self.name}/{path}"

    def get(self, path: str, token: bool = True) -> tuple[int, Any]:
        return 0, []  # the sessions of a failed opening: the hub's log says more

    def log_tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else "(no log)"


def krmcourse(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """The instructor's command, as a separate process (root, in the test's own state folder)."""
    return subprocess.run([sys.executable, "-m", "krmcourse.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def as_user(name: str, *argv: str, room: MadeRoom | None = None) -> subprocess.CompletedProcess[str]:
    """Run a command as one of the room's accounts; with ``room``, in the environment its JupyterLab
    gives it (the shared venv, toolchain and locks, the room's limit on lab clusters)."""
    env = ["env", "-i", *(f"{k}={v}" for k, v in hub.learner_env(name, room.record).items())] if room else []
    return subprocess.run(["runuser", "-u", name, "--", *env, *argv], capture_output=True, text=True, cwd="/",
                          timeout=600)


def learner_krmcourse(room: MadeRoom, name: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``krmcourse ARGS`` as a learner runs it in a terminal of their JupyterLab."""
    return as_user(name, str(room.record.venv / "bin" / "krmcourse"), *args, room=room)


def _remove_leftover_accounts(names: list[str]) -> list[str]:
    """The safety net after ``hub stop --remove-accounts``: what it left of the test's accounts, removed."""
    left = []
    for name in names:
        if not hub.account_exists(name):
            continue
        left.append(name)
        hub.kill_processes_of(name)
        subprocess.run(["userdel", "--remove", "--force", name], capture_output=True)
    return left


@pytest.fixture(scope="module")
def room() -> Iterator[MadeRoom]:
    if os.geteuid() != 0:
        pytest.skip("needs root: the hub makes Unix accounts and runs each learner's JupyterLab as its learner")
    if shutil.which("npm") is None or not hub.proxy_command().exists():
        pytest.fail(f"the hub's downloads are not in {hub.downloads_dir()}: run 'krmcourse hub prepare' (./course "
                    "install does it, with Node.js and npm installed) while the registries are reachable",
                    pytrace=False)
    tag = secrets.token_hex(2)
    prefix, admin = f"kh{tag}l", f"kh{tag}admin"
    learners = hub.learner_names(prefix, LEARNERS)
    taken = [n for n in [*learners, admin] if hub.account_exists(n)]
    assert not taken, f"accounts {taken} exist already; the test only makes accounts of its own"
    # Learners must be able to enter it: pytest's own temporary folders are root's only (mode 0700).
    base = Path(tempfile.mkdtemp(prefix="krmcourse-hub-test-", dir="/tmp"))
    os.chmod(base, 0o755)
    try:
        start = ["hub", "start", "--learners", str(LEARNERS), "--learner-prefix", prefix, "--admin", admin,
                 "--max-labs", str(MAX_LABS), "--prefix", str(base / "opt"), "--homes", str(base / "homes")]
        done = krmcourse(*start)
        assert done.returncode == 0, f"hub start failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
        found = ADDRESS.search(done.stdout)
        assert found, f"hub start printed no address:\n{done.stdout}"
        passwords = dict(line.split(" ", 1) for line in hub.passwords_file().read_text().splitlines())
        uids = {n: pwd.getpwnam(n).pw_uid for n in [*learners, admin]}
        made = MadeRoom(found.group(1), base, learners, admin, passwords, uids, output=done.stdout, start=start)
        record = made.record
        made.ports |= {record.port, record.hub_port, record.api_port}
        yield made
    finally:
        stopped = krmcourse("hub", "stop", "--remove-accounts")
        left = _remove_leftover_accounts([*learners, admin])
        shutil.rmtree(base, ignore_errors=True)
        assert stopped.returncode == 0, f"hub stop failed:\n{stopped.stdout}\n{stopped.stderr}"
        assert not left, f"hub stop --remove-accounts left the accounts {left}"


@pytest.fixture
def page(chromium: Browser) -> Iterator[Page]:
    """A page in a browser context of its own (its own cookies: one learner's login). The test fails
    if the page asked for anything but 127.0.0.1."""
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(pages.ACTION_MS)
    outside: list[str] = []
    context.on("request", lambda r: None if re.match(r"(data|blob|about):|http://127\.0\.0\.1[:/]", r.url)
               else outside.append(r.url))
    yield context.new_page()
    context.close()
    assert not outside, f"the page asked for addresses outside 127.0.0.1: {outside[:5]}"


def log_in(page: Page, room: MadeRoom, name: str, password: str, then: str = "") -> None:
    """Log in at the hub's page; ``then``: where the hub sends the browser next (default: the user's server)."""
    page.goto(f"{room.url}hub/login" + (f"?next={then}" if then else ""))
    page.locator("#username_input").fill(name)
    page.locator("#password_input").fill(password)
    page.locator("#login_submit").click()


def owner(pid: int) -> int | None:
    """The real uid a process runs as, or None once it has gone."""
    try:
        return psutil.Process(pid).uids().real
    except psutil.Error:
        return None


def processes_of(uid: int) -> list[psutil.Process]:
    """The running processes of one account (not zombies: they have exited, and hold no port or file)."""
    return [p for p in psutil.process_iter(["uids", "status"]) if p.info["uids"] is not None
            and p.info["uids"].real == uid and p.info["status"] != psutil.STATUS_ZOMBIE]


def commands(procs: list[psutil.Process]) -> list[str]:
    found = []
    for proc in procs:
        try:
            found.append(" ".join(proc.cmdline()))
        except psutil.Error:  # it exited meanwhile
            continue
    return found


def hub_and_proxy(room: MadeRoom) -> list[int]:
    hub_pid = hub.running_hub()
    assert hub_pid is not None, "the hub is not running"
    proxy = psutil.Process(hub_pid).children()
    return [hub_pid, *(p.pid for p in proxy if "configurable-http-proxy" in " ".join(p.cmdline()))]


# ----------------------------------------------------------------- before anything starts
def test_a_port_in_use_is_refused_before_anything_is_made() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: hub start refuses anyone else before it looks at the port")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = krmcourse("hub", "start", "--learners", "1", "--learner-prefix", f"kp{secrets.token_hex(2)}l",
                         "--prefix", "/nonexistent/krmcourse-hub", "--port", str(port))
    assert done.returncode == 4, f"exit {done.returncode}:\n{done.stdout}\n{done.stderr}"
    assert f"Port {port} on 127.0.0.1 is taken" in done.stderr and "--port" in done.stderr, done.stderr
    assert hub.Room.load() is None and not Path("/nonexistent/krmcourse-hub").exists(), "it made something"


def test_an_existing_account_is_never_made_the_rooms_admin() -> None:
    """hub stop signals, and --remove-accounts removes, the room's accounts: root must never be one."""
    if os.geteuid() != 0:
        pytest.skip("needs root: hub start refuses anyone else before it looks at the admin")
    done = krmcourse("hub", "start", "--learners", "1", "--learner-prefix", f"ka{secrets.token_hex(2)}l",
                     "--admin", "root", "--prefix", "/nonexistent/krmcourse-hub")
    assert done.returncode == 8, f"exit {done.returncode}:\n{done.stdout}\n{done.stderr}"
    assert "An account named root exists already" in done.stderr and "--admin" in done.stderr, done.stderr
    assert hub.Room.load() is None and not Path("/nonexistent/krmcourse-hub").exists(), "it made something"
    with pytest.raises(hub.HubError, match="system account"):
        hub.kill_processes_of("root")


def test_root_runs_the_hub_only_from_a_prefix_nobody_else_can_write(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: only root's folders are safe for root to run the hub from")
    open_folder = tmp_path / "open"
    open_folder.mkdir(mode=0o777)
    os.chmod(open_folder, 0o777)  # (mkdir's mode passes through the umask)
    with pytest.raises(hub.HubError, match="not root's alone"):
        hub._safe_prefix(open_folder / "krmcourse")
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.chown(theirs, 65534, 65534)  # nobody's
    with pytest.raises(hub.HubError, match="not root's alone"):
        hub._safe_prefix(theirs)
    assert hub._safe_prefix(tmp_path / "safe" / "krmcourse").is_dir()


def test_only_the_rooms_learners_get_a_server(tmp_path: Path) -> None:
    """The spawner runs a server as the user's Unix account: a user a hub admin adds in the hub's pages
    (root, or the admin itself) gets none."""
    # nobody: an account that exists, with a uid above the system's, here as the room's admin.
    record = hub.Room(prefix=str(tmp_path), homes=str(tmp_path), learner_prefix="kx", admin="nobody",
                      learners=["kx01"])
    (tmp_path / "room.json").write_text(json.dumps(asdict(record)))
    check = hub._learners_only(tmp_path)
    for name in ("root", "nobody", "kx02"):
        with pytest.raises(hub.HubError, match="not one of this room's learners"):
            check(SimpleNamespace(user=SimpleNamespace(name=name)))


#: What an API server answers a client with no credentials (a status code), run as another learner.
ASK_ANONYMOUSLY = """import ssl, sys, urllib.error, urllib.request
try:
    print(urllib.request.urlopen(sys.argv[1], context=ssl._create_unverified_context(), timeout=30).status)
except urllib.error.HTTPError as error:
    print(error.code)
"""


# ----------------------------------------------------------------- the room as set up
def test_hub_and_proxy_listen_on_loopback_only_and_the_rooms_secrets_are_private(room: MadeRoom) -> None:
    pids = hub_and_proxy(room)
    assert len(pids) == 2, f"expected the hub and its proxy, found {pids}"
    addresses = hub.listening(pids)
    assert addresses and {ip for ip, _ in addresses} == {"127.0.0.1"}, f"they listen on {addresses}"
    room.ports |= {port for _, port in addresses}
    for path in (hub.passwords_file(), hub.hub_dir() / "jupyterhub_cookie_secret", hub.hub_dir() / "proxy_token",
                 hub.hub_dir() / "api_token"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, f"{path} is not private to root"
    for name in room.learners:
        home = Path(pwd.getpwnam(name).pw_dir)
        assert stat.S_IMODE(home.stat().st_mode) == 0o700, f"{home} is readable by others"
        assert (home / "notebooks" / NOTEBOOK).stat().st_uid == room.uids[name], f"{name} does not own the notebooks"
    assert str(hub.passwords_file()) in room.output, "hub start did not say where the passwords are"
    status = krmcourse("hub", "status")
    assert status.returncode == 0 and f"running (pid {hub.running_hub()}) at {room.url}" in status.stdout, status
    assert all(re.search(rf"^{n}\s+server stopped\s+lab clusters 0$", status.stdout, re.M) for n in room.learners), \
        status.stdout
    assert not any(p in room.output for p in room.passwords.values()), "hub start printed a password"


def test_a_wrong_password_is_refused(room: MadeRoom, page: Page) -> None:
    name = room.learners[0]
    log_in(page, room, name, room.passwords[name] + "x")
    page.get_by_text("Invalid username or password").wait_for()
    assert "/hub/login" in page.url, f"a wrong password got past the login page, to {page.url}"
    log_in(page, room, room.learners[1], room.passwords[room.learners[0]])  # another learner's password
    page.get_by_text("Invalid username or password").wait_for()
    assert not any(p.info["uids"] is not None and p.info["uids"].real in room.uids.values()
                   for p in psutil.process_iter(["uids"])), "a refused login started a server"


def test_a_learner_cannot_read_another_learners_kubeconfig(room: MadeRoom) -> None:
    a, b = room.learners[0], room.learners[1]
    up = learner_krmcourse(room, b, "up", "welcome")
    assert up.returncode == 0, f"{b} could not bring up a lab:\n{up.stdout}\n{up.stderr}"
    found = re.search(r"export KUBECONFIG=(\S+)", up.stdout)
    assert found, up.stdout
    kubeconfig = Path(found.group(1))
    assert kubeconfig.is_relative_to(pwd.getpwnam(b).pw_dir), f"{b}'s kubeconfig is outside their home: {kubeconfig}"
    try:
        own = as_user(b, "cat", str(kubeconfig))
        assert own.returncode == 0 and "clusters:" in own.stdout, \
            f"{b} cannot read their own kubeconfig: {own.stderr}"
        other = as_user(a, "cat", str(kubeconfig))
        assert other.returncode != 0 and "Permission denied" in other.stderr, \
            f"{a} read {b}'s kubeconfig (exit {other.returncode}): {other.stdout[:200]}"
        opened = as_user(a, "/usr/bin/python3", "-c", f"open({str(kubeconfig)!r}).read()")
        assert "PermissionError" in opened.stderr, f"{a} opened {b}'s kubeconfig from Python: {opened.stderr}"
        # Without B's credentials, A reaches B's API server (on 127.0.0.1, as every port is) but may do nothing.
        server = re.search(r"server: (https://127\.0\.0\.1:\d+)", own.stdout)
        assert server, own.stdout
        secrets_url = f"{server.group(1)}/api/v1/namespaces/default/secrets"
        asked = as_user(a, "/usr/bin/python3", "-c", ASK_ANONYMOUSLY, secrets_url)
        assert asked.stdout.strip() in ("401", "403"), f"{a} asked {b}'s API server without credentials: {asked}"
        # Nor past it, at B's etcd: its address is on a command line anyone may read, but it answers only
        # TLS with a certificate of B's cluster, whose keys A cannot read.
        flags = [flags_of(c.split()) for c in commands(processes_of(room.uids[b])) if "kube-apiserver" in c.split()[0]]
        assert flags and flags[0]["etcd-servers"].startswith("https://127.0.0.1:"), flags
        etcd = flags[0]["etcd-servers"]
        for url in (etcd.replace("https://", "http://"), etcd):
            asked = as_user(a, "/usr/bin/python3", "-c", ASK_ANONYMOUSLY, f"{url}/v3/kv/range")
            refused = re.search(r"RemoteDisconnected|CERTIFICATE_REQUIRED|ConnectionResetError", asked.stderr)
            assert asked.returncode != 0 and not asked.stdout.strip() and refused, \
                f"{a} reached {b}'s etcd at {url} without a certificate: {asked.stdout} {asked.stderr[-300:]}"
        key = as_user(a, "cat", flags[0]["etcd-keyfile"])
        assert key.returncode != 0 and "Permission denied" in key.stderr, f"{a} read {b}'s etcd key"
    finally:
        down = learner_krmcourse(room, b, "down", "welcome")
        assert down.returncode == 0, down.stderr


def test_a_learner_meets_the_rooms_limit_on_lab_clusters_with_a_clear_message(room: MadeRoom) -> None:
    name = room.learners[2]
    first = learner_krmcourse(room, name, "up", "welcome")
    assert first.returncode == 0, first.stderr
    try:
        second = learner_krmcourse(room, name, "up", "controllers")
        assert second.returncode == 2, f"a lab past the limit of {MAX_LABS}: exit {second.returncode}\n{second.stderr}"
        assert "the most allowed here (KRMCOURSE_MAX_LABS=1)" in second.stderr, second.stderr
        assert "krmcourse down LAB" in second.stderr, second.stderr
        assert not [c for c in commands(processes_of(room.uids[name])) if "krm-controllers" in c], \
            "the refused lab started something"
    finally:
        down = learner_krmcourse(room, name, "down", "welcome")
        assert down.returncode == 0, down.stderr


def test_an_instructor_adds_and_removes_a_learner_while_the_hub_runs(room: MadeRoom) -> None:
    name = f"{room.record.learner_prefix}{LEARNERS + 1:02d}"
    home = Path(room.record.homes) / name
    added = krmcourse("hub", "add-learner", name)
    try:
        assert added.returncode == 0, f"add-learner failed:\n{added.stdout}\n{added.stderr}"
        assert hub.account_exists(name) and name in room.record.learners
        password = dict(line.split(" ", 1) for line in hub.passwords_file().read_text().splitlines()).get(name)
        assert password and password not in added.stdout, "no password kept for the new learner, or one printed"
        assert hub.api(room.record, "GET", f"users/{name}")[0] == 200, "the running hub does not know the learner"
        assert Path(pwd.getpwnam(name).pw_dir) == home
        assert stat.S_IMODE(home.stat().st_mode) == 0o700 and (home / "notebooks" / NOTEBOOK).is_file()
        # Removed with a server running: the hub answers 202 while it stops, and refuses to delete the
        # user until it has; remove-learner waits for that.
        assert hub.api(room.record, "POST", f"users/{name}/server")[0] in (201, 202)
        Lab.wait_until(lambda: (hub.api(room.record, "GET", f"users/{name}")[1]["servers"].get("") or {})
                       .get("ready"), timeout=300, message=f"{name}'s server never became ready")
    finally:
        removed = krmcourse("hub", "remove-learner", name)
        left = _remove_leftover_accounts([name])
    assert removed.returncode == 0, f"remove-learner failed:\n{removed.stdout}\n{removed.stderr}"
    assert not left, f"remove-learner left the account {name}"
    assert not home.exists(), f"remove-learner left {home}"
    assert hub.api(room.record, "GET", f"users/{name}")[0] == 404, "the hub still lists the removed learner"
    assert name not in room.record.learners and name not in hub.passwords_file().read_text()


# ----------------------------------------------------------------- three learners, one after the other
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("index", range(LEARNERS))
def test_a_learner_logs_in_and_runs_the_welcome_notebook(room: MadeRoom, page: Page, index: int) -> None:
    name = room.learners[index]
    uid = room.uids[name]
    log_in(page, room, name, room.passwords[name])
    page.wait_for_url(re.compile(f"/user/{name}/lab"), timeout=pages.ACTION_MS)
    server = LearnerServer(room, name, hub.hub_dir() / "jupyterhub.log")
    copy = Path(pwd.getpwnam(name).pw_dir) / "notebooks" / NOTEBOOK
    pages.run_whole_notebook(page, server, NOTEBOOK, nbs.hidden_inputs(copy), RUN_MS)
    # The learner's JupyterLab and kernel run as the learner, on 127.0.0.1 only.
    theirs = processes_of(uid)
    running = commands(theirs)
    assert any("jupyterhub-singleuser" in c for c in running), f"{name}'s JupyterLab is not theirs: {running}"
    assert any("ipykernel" in c for c in running), f"{name}'s kernel does not run as {name}: {running}"
    addresses = hub.listening([p.pid for p in theirs])
    assert {ip for ip, _ in addresses} == {"127.0.0.1"}, f"{name}'s processes listen on {addresses}"
    room.ports |= {port for _, port in addresses}
    # Another learner's server is not theirs to open: the hub sends them away.
    other = room.learners[(index + 1) % LEARNERS]
    answer = page.request.get(f"{room.url}user/{other}/api/contents")
    assert answer.status in (403, 404), f"{name} asked {other}'s server for their files: {answer.status} {answer.url}"


# ----------------------------------------------------------------- a server stops: its learner's labs go
def start_server(room: MadeRoom, name: str) -> None:
    """Start a learner's server through the hub's API, unless it runs, and wait until its process runs."""
    if not any("singleuser" in c for c in commands(processes_of(room.uids[name]))):
        status, body = hub.api(room.record, "POST", f"users/{name}/server")
        assert status in (201, 202), f"the hub did not start {name}'s server: {status} {body}"
    Lab.wait_until(lambda: any("singleuser" in c for c in commands(processes_of(room.uids[name]))), 180,
                   interval=0.5, message=f"{name}'s server did not start")


def test_the_rooms_service_reaches_a_learners_jupyterlab_and_nobody_else_without_a_token(room: MadeRoom) -> None:
    """benchmarks/room.py starts kernels in the learners' JupyterLabs with the room's service token."""
    name = room.learners[1]
    start_server(room, name)
    Lab.wait_until(lambda: hub.server_api(room.record, name, "GET", "status")[0] == 200, 120, interval=0.5,
                   message=f"the room's service could not reach {name}'s JupyterLab")
    status, kernel = hub.server_api(room.record, name, "POST", "kernels", {"name": "python3"})
    assert status == 201 and kernel["id"], f"the room's service started no kernel for {name}: {status} {kernel}"
    try:
        assert kernel["id"] in [k["id"] for k in hub.server_api(room.record, name, "GET", "kernels")[1]]
        request = urllib.request.Request(f"{room.url}user/{name}/api/kernels")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=60)
        assert refused.value.code == 403, f"{name}'s kernels without a token: {refused.value.code}"
    finally:
        hub.server_api(room.record, name, "DELETE", f"kernels/{kernel['id']}")
        hub.api(room.record, "DELETE", f"users/{name}/server")


def test_when_a_learners_server_stops_their_lab_clusters_stop_too(room: MadeRoom) -> None:
    name = room.learners[0]
    uid = room.uids[name]
    start_server(room, name)
    up = learner_krmcourse(room, name, "up", "welcome")
    assert up.returncode == 0, up.stderr
    running = commands(processes_of(uid))
    assert any("kube-apiserver" in c for c in running), f"{name}'s lab cluster is not running: {running}"
    status, body = hub.api(room.record, "DELETE", f"users/{name}/server")
    assert status in (202, 204), f"the hub did not stop {name}'s server: {status} {body}"
    try:
        Lab.wait_until(lambda: not processes_of(uid), 180, interval=0.5)
    except TimeoutError:
        pytest.fail(f"{name}'s server stopped, and their processes still run: {commands(processes_of(uid))}; the "
                    f"hub's log ends:\n{(hub.hub_dir() / 'jupyterhub.log').read_text()[-3000:]}", pytrace=False)


def test_a_learners_server_killed_takes_their_labs_down_and_keeps_their_files(room: MadeRoom) -> None:
    """A server that dies (killed, out of memory) is found by the hub's poll, which runs the post-stop hook:
    the learner's lab clusters stop too, and nothing in their home is lost."""
    name = room.learners[2]
    uid, home = room.uids[name], Path(pwd.getpwnam(name).pw_dir)
    start_server(room, name)
    up = learner_krmcourse(room, name, "up", "welcome")
    assert up.returncode == 0, up.stderr
    (home / "notebooks" / "my-notes.txt").write_text("mine\n")
    os.chown(home / "notebooks" / "my-notes.txt", uid, -1)
    kept = hub.learner_files(name)
    servers = [p for p in processes_of(uid) if "singleuser" in " ".join(commands([p]))]
    assert servers, f"{name}'s server is not running: {commands(processes_of(uid))}"
    for server in servers:
        server.kill()
    try:
        Lab.wait_until(lambda: not processes_of(uid), 180, interval=1)
    except TimeoutError:
        pytest.fail(f"{name}'s server was killed, and their processes still run: {commands(processes_of(uid))}; "
                    f"the hub's log ends:\n{(hub.hub_dir() / 'jupyterhub.log').read_text()[-3000:]}", pytrace=False)
    now = hub.learner_files(name)
    assert kept <= now, f"{name} lost {sorted(kept - now)}"
    assert not hub.labs_up(name), f"{name}'s lab clusters are still recorded: {hub.labs_up(name)}"


# ----------------------------------------------------------------- the instructor's view
#: The goal of issue 16: a learner's solved exercise shows in the instructor's view within 10 s. The view
#: reads the learners' saved checks afresh on every load, and reloads itself every REFRESH_SECONDS; so the
#: test counts reloads, which is the same on any machine, and holds the page's reload period to the goal.
RELOADS_TO_SHOW = 2
#: Only guards against a view that stopped reloading.
RELOAD_MS = 60_000
#: A reset from the view: the lab's cluster made again, on a busy two-core machine.
RESET_MS = 300_000


def view_url(room: MadeRoom) -> str:
    return f"{room.url}services/{hub.VIEW}/"


def open_view(page: Page, room: MadeRoom, name: str) -> None:
    """Log in as ``name`` and open the view (straight there: a learner's login starts no server)."""
    log_in(page, room, name, room.passwords[name], then=f"/services/{hub.VIEW}/")
    page.wait_for_url(view_url(room))


def exercise_row(page: Page, learner: str, lab: str, exercise: str, state: str) -> Locator:
    return page.locator(f'#learner-{learner} tr[data-exercise="{lab}/{exercise}"][data-state="{state}"]')


def root_files_in_home(name: str) -> list[str]:
    """Files in a learner's home that root owns: the view reads their state as root, and must write nothing."""
    home = Path(pwd.getpwnam(name).pw_dir)
    return [str(p) for p in home.rglob("*") if p.lstat().st_uid == 0]


def test_the_view_listens_on_loopback_only_and_refuses_who_is_not_logged_in(room: MadeRoom) -> None:
    services = hub.services_left()
    assert sorted(" ".join(commands([p])).split()[2] for p in services) == ["jupyterhub_idle_culler",
                                                                           "krmcourse.roomview"], commands(services)
    addresses = hub.listening([p.pid for p in services])
    assert addresses == {("127.0.0.1", room.record.view_port)}, f"the hub's services listen on {addresses}"
    room.ports |= {port for _, port in addresses}
    # Without the hub's login: sent to the hub's OAuth (which asks for a login), and shown nothing.
    request = urllib.request.Request(view_url(room))
    with pytest.raises(urllib.error.HTTPError) as sent:
        urllib.request.build_opener(NoRedirect).open(request, timeout=30)
    assert sent.value.code == 302 and "/hub/api/oauth2/authorize" in sent.value.headers["Location"], sent.value
    posted = urllib.request.Request(view_url(room), method="POST",
                                    data=f"learner={room.learners[0]}&lab=welcome&at=".encode())
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.build_opener(NoRedirect).open(posted, timeout=30)
    assert refused.value.code == 403, refused.value
    assert room.learners[0] not in refused.value.read().decode(), "the refusal shows a learner"


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


@pytest.mark.timeout(900)
def test_the_admin_sees_each_learners_checks_a_solve_at_the_next_reloads_and_resets_a_lab(room: MadeRoom,
                                                                                          page: Page) -> None:
    name, other = room.learners[0], room.learners[1]
    up = learner_krmcourse(room, name, "up", "welcome")
    assert up.returncode == 0, up.stderr
    try:
        checked = learner_krmcourse(room, name, "check", "welcome", "hello-namespace")
        assert checked.returncode == 1 and "no Namespace called 'hello'" in checked.stderr, checked
        open_view(page, room, room.admin)
        stuck = exercise_row(page, name, "welcome", "hello-namespace", "stuck")
        stuck.wait_for()
        assert "no Namespace called 'hello'" in stuck.inner_text(), "the view does not show the hint the learner saw"
        assert "No lab up." in page.locator(f"#learner-{other}").inner_text(), "a learner with no lab shows one"
        # The learner solves it and checks again: the view shows it by its second reload after the check (the
        # first may have begun before the check saved its result). Two of the page's reload periods fit in
        # the goal of 10 s; how long they take on this machine is printed, not asserted.
        period = int(page.locator('meta[http-equiv="refresh"]').get_attribute("content") or 0)
        assert 0 < RELOADS_TO_SHOW * period < 10, f"the view reloads every {period} s: {RELOADS_TO_SHOW} reloads " \
                                                  "do not fit in the goal of 10 s"
        solved = learner_krmcourse(room, name, "solve", "welcome", "hello-namespace")
        assert solved.returncode == 0, solved.stderr
        assert learner_krmcourse(room, name, "check", "welcome", "hello-namespace").returncode == 0
        began = time.monotonic()
        for _ in range(RELOADS_TO_SHOW):
            page.wait_for_event("load", timeout=RELOAD_MS)
        shown = exercise_row(page, name, "welcome", "hello-namespace", "solved").count()
        print(f"the view reloaded {RELOADS_TO_SHOW} times in {time.monotonic() - began:.1f} s after {name}'s check")
        assert shown == 1, (f"{RELOADS_TO_SHOW} reloads of the view after {name}'s check still do not show the "
                            f"exercise solved: {page.locator(f'#learner-{name}').inner_text()}")
        # "reset this lab": the learner's lab comes back, as it starts, with the exercise not tried.
        page.locator(f'#learner-{name} table[data-lab="welcome"] th button').click()
        page.locator(f'#learner-{name} .reset[data-state="done"]').wait_for(timeout=RESET_MS)
        assert learner_krmcourse(room, name, "kubectl", "welcome", "get", "namespace", "default").returncode == 0, \
            "the lab is not up after the reset"
        hello = learner_krmcourse(room, name, "kubectl", "welcome", "get", "namespace", "hello")
        assert hello.returncode != 0 and "NotFound" in hello.stderr, f"the reset kept the learner's work: {hello}"
        exercise_row(page, name, "welcome", "hello-namespace", "not tried").wait_for()
        assert not root_files_in_home(name), f"root's files in {name}'s home: {root_files_in_home(name)[:5]}"
    finally:
        down = learner_krmcourse(room, name, "down", "welcome")
        assert down.returncode == 0, down.stderr


@pytest.mark.timeout(900)
def test_a_reset_at_an_exercise_from_the_view_solves_the_ones_before(room: MadeRoom, page: Page) -> None:
    name = room.learners[1]
    up = learner_krmcourse(room, name, "up", "claims")
    assert up.returncode == 0, up.stderr
    try:
        open_view(page, room, room.admin)
        page.locator(f'#learner-{name} tr[data-exercise="claims/recycle-legacy"] button').click()
        page.locator(f'#learner-{name} .reset[data-state="done"]').wait_for(timeout=RESET_MS)
        before = learner_krmcourse(room, name, "check", "claims", "retain-billing")
        assert before.returncode == 0, f"reset --at left the exercise before unsolved: {before.stderr}"
        at = learner_krmcourse(room, name, "check", "claims", "recycle-legacy")
        assert at.returncode == 1, f"reset --at solved the exercise it starts at: exit {at.returncode} {at.stderr}"
        exercise_row(page, name, "claims", "retain-billing", "solved").wait_for(timeout=RELOAD_MS)
        exercise_row(page, name, "claims", "recycle-legacy", "stuck").wait_for(timeout=RELOAD_MS)
    finally:
        down = learner_krmcourse(room, name, "down", "claims")
        assert down.returncode == 0, down.stderr


def test_a_learner_sees_only_their_own_row_and_resets_no_one_elses_lab(room: MadeRoom, page: Page) -> None:
    name, other = room.learners[2], room.learners[0]
    open_view(page, room, name)
    page.locator(f"#learner-{name}").wait_for()
    shown = page.locator("section").evaluate_all("sections => sections.map(s => s.id)")
    assert shown == [f"learner-{name}"], f"{name} sees {shown}"
    token = page.locator("input[name=_xsrf]")
    assert token.count() == 0, "a learner with no lab up has buttons"
    xsrf = page.context.cookies(view_url(room))
    forged = page.request.post(view_url(room), form={"learner": other, "lab": "welcome", "at": "",
                               "_xsrf": next((c["value"] for c in xsrf if c["name"] == "_xsrf"), "")})
    assert forged.status == 403 and "may not reset" in forged.text(), \
        f"{name} asked to reset {other}'s lab: {forged.status} {forged.text()[:200]}"


# ----------------------------------------------------------------- a hub that dies, started again
def test_a_hub_started_again_after_it_was_killed_cleans_up_what_the_dead_one_left(room: MadeRoom) -> None:
    start_server(room, room.learners[0])  # its server stopped in the test before
    old = [psutil.Process(pid) for pid in hub_and_proxy(room)]
    services = hub.services_left()
    assert len(services) == 2, f"expected the view and the culler, found {commands(services)}"
    servers = [p for uid in room.uids.values() for p in processes_of(uid) if "singleuser" in "".join(commands([p]))]
    old[0].kill()  # the hub only (SIGKILL): its proxy and the learners' servers run on
    Lab.wait_until(lambda: hub.running_hub() is None, 30, message="the killed hub still runs")
    again = krmcourse(*room.start)
    assert again.returncode == 0, f"hub start after a crash failed:\n{again.stdout}\n{again.stderr}"
    assert "stopped what it left running" in again.stdout, again.stdout
    left = [p.pid for p in [*servers, *services, *old[1:]] if _running(p)]
    assert not left, f"processes of the dead hub still run: {left}"
    assert "the hub's service" in again.stdout, again.stdout
    room.ports |= {port for _, port in hub.listening(hub_and_proxy(room))}
    room.ports |= {room.record.port, room.record.hub_port, room.record.api_port}


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


# ----------------------------------------------------------------- idle learners are culled
#: A short idle timeout, for the culling test: the hub is started again with it.
IDLE_SECONDS = 20


@pytest.mark.timeout(900)
def test_an_idle_learners_server_is_culled_and_their_lab_clusters_stop(room: MadeRoom) -> None:
    stopped = krmcourse("hub", "stop")
    assert stopped.returncode == 0 and "had to kill" not in stopped.stdout, stopped
    room.start = [*room.start, "--idle-timeout", str(IDLE_SECONDS)]
    again = krmcourse(*room.start)
    assert again.returncode == 0, f"hub start --idle-timeout failed:\n{again.stdout}\n{again.stderr}"
    assert f"stop after {IDLE_SECONDS} s" in again.stdout, again.stdout
    room.ports |= {room.record.port, room.record.hub_port, room.record.api_port, room.record.view_port}
    name = room.learners[2]
    uid = room.uids[name]
    # The lab comes up before the server starts, so the idle clock, which starts with the server, cannot
    # run out while `up` is still at work: on a busy machine a server started first was culled just as
    # `up` returned, and the test found no cluster to watch stop.
    up = learner_krmcourse(room, name, "up", "welcome")
    assert up.returncode == 0, up.stderr
    assert any("kube-apiserver" in c for c in commands(processes_of(uid))), f"{name}'s lab cluster is not running"
    start_server(room, name)
    began = time.monotonic()
    try:
        Lab.wait_until(lambda: not processes_of(uid), 300, interval=0.5)
    except TimeoutError:
        pytest.fail(f"{name}'s server was idle for {time.monotonic() - began:.0f} s, and their processes still run: "
                    f"{commands(processes_of(uid))}; the hub's log ends:\n"
                    f"{(hub.hub_dir() / 'jupyterhub.log').read_text()[-3000:]}", pytrace=False)
    culled = time.monotonic() - began
    status, user = hub.api(room.record, "GET", f"users/{name}")
    assert status == 200 and not user["server"], f"the hub still lists {name}'s server: {user}"
    log = (hub.hub_dir() / "jupyterhub.log").read_text()
    assert re.search(rf"Culling server {name} \(inactive for", log), "the culler did not say it culled the server"
    assert culled > IDLE_SECONDS, f"{name}'s server was stopped after {culled:.0f} s, before it was idle long enough"
    print(f"{name}'s idle server, and their lab cluster, stopped {culled:.0f} s after the server started")


# ----------------------------------------------------------------- stop
def test_hub_stop_leaves_no_process_port_or_account(room: MadeRoom) -> None:
    pids = hub_and_proxy(room)
    for name in room.learners:  # a lab left up, to be stopped with the rest
        up = learner_krmcourse(room, name, "up", "welcome")
        assert up.returncode == 0, up.stderr
    processes = {uid: processes_of(uid) for uid in room.uids.values()}
    assert all(processes[room.uids[n]] for n in room.learners), "a learner has no process before the stop"
    room.ports |= {port for _, port in hub.listening([p.pid for procs in processes.values() for p in procs])}
    homes = [Path(pwd.getpwnam(n).pw_dir) for n in room.learners]
    done = krmcourse("hub", "stop", "--remove-accounts")
    assert done.returncode == 0, f"hub stop failed:\n{done.stdout}\n{done.stderr}"
    assert "had to kill" not in done.stdout, f"hub stop had to kill what the hub should have stopped:\n{done.stdout}"
    assert not [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE], \
        "the hub or its proxy still runs"
    left = [c[:120] for uid in room.uids.values() for c in commands(processes_of(uid))]
    assert not left, f"processes of the room's accounts still run: {left}"
    assert not hub.services_left(), f"the hub's services still run: {commands(hub.services_left())}"
    # A port the room let go may already serve another test's cluster: only the room's own listeners count.
    ours = set(room.uids.values())
    still = [(c.laddr.port, c.pid) for c in psutil.net_connections(kind="inet")
             if c.status == psutil.CONN_LISTEN and c.laddr.port in room.ports
             and (c.pid is None or c.pid in pids or owner(c.pid) in ours)]
    assert not still, f"ports of the room still listen (port, pid): {still}"
    assert not [n for n in [*room.learners, room.admin] if hub.account_exists(n)], "accounts left"
    assert not [h for h in homes if h.exists()], "homes left"
