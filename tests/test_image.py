"""The user image for a hub on Kubernetes (z2jh), run here as the values file says a learner's pod runs.

``krmcourse image build`` makes the image (or finds one of the same content); each test starts a
container of it with ``docker run`` under the options :func:`krmcourse.userimage.run_options` reads from
``deploy/z2jh/values.yaml``: uid 1000 in group 100, every capability dropped, no privilege escalation,
the memory limit, no swap. Inside, a learner's lab comes up, notebook 00 runs, and ``krmcourse down``
leaves no process and no folder of the lab. A real JupyterHub, with its proxy, starts the image's
``jupyterhub-singleuser`` under the same options and serves it to the learner. Every container is
removed at the end, failed or not. See tests/README.md, "The image test".
"""

from __future__ import annotations

import json
import secrets
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from krmcourse import userimage

NOTEBOOK = "00-welcome.ipynb"
#: What stays in the test's container after ``down``: tini (PID 1) and the command it runs.
IDLE = ("tini", "sleep")
STATE = "/home/jovyan/.local/state/krmcourse"


@pytest.fixture(scope="module")
def image() -> str:
    """The user image of the course as it is now; a stopped engine fails here, saying how to start it."""
    return userimage.build(say=print)


@pytest.fixture(scope="module")
def values() -> dict[str, object]:
    return userimage.values()


def docker(*args: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise AssertionError(f"docker {' '.join(args[:4])} ... exited {done.returncode}:\n"
                             f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done


class Container:
    """A container of the image, started detached under the values' options; removed by the fixture."""

    def __init__(self, image: str, options: list[str], command: list[str], env: dict[str, str]) -> None:
        self.name = f"krmcourse-image-test-{secrets.token_hex(4)}"
        flags = [f"--env={k}={v}" for k, v in env.items()]
        self.id = docker("run", "--detach", f"--name={self.name}", "--label=krmcourse.test=image", *options,
                         *flags, image, *command).stdout.strip()

    def exec(self, *command: str, env: dict[str, str] | None = None, timeout: float = 900,
             check: bool = True) -> subprocess.CompletedProcess[str]:
        flags = [f"--env={k}={v}" for k, v in (env or {}).items()]
        return docker("exec", *flags, self.id, *command, timeout=timeout, check=check)

    def inspect(self) -> dict[str, object]:
        found = json.loads(docker("inspect", self.id).stdout)
        assert isinstance(found, list) and isinstance(found[0], dict)
        return found[0]

    def processes(self) -> list[str]:
        """The command line of every process in the container, as the engine sees it."""
        rows = docker("top", self.id, "-o", "pid,args").stdout.splitlines()[1:]  # (the engine needs the pid)
        return [row.strip().split(None, 1)[1] for row in rows if len(row.split(None, 1)) == 2]

    def memory_peak(self) -> int | None:
        """The most memory the container's cgroup has used (cgroup v1 or v2), in bytes."""
        for path in (f"/sys/fs/cgroup/memory/docker/{self.id}/memory.max_usage_in_bytes",
                     f"/sys/fs/cgroup/system.slice/docker-{self.id}.scope/memory.peak"):
            if Path(path).is_file():
                return int(Path(path).read_text())
        return None

    def remove(self) -> None:
        docker("rm", "--force", "--volumes", self.id, check=False)


@pytest.fixture
def containers(image: str) -> Iterator[list[Container]]:
    """Containers a test starts; each is removed at the end, whatever happened."""
    started: list[Container] = []
    yield started
    for container in started:
        container.remove()
    left = docker("ps", "--all", "--quiet", "--filter", "label=krmcourse.test=image").stdout.split()
    assert not [c for c in left if any(c.startswith(s.id[:12]) for s in started)], "a test container was left"


def start(containers: list[Container], image: str, values: dict[str, object], command: list[str],
          env: dict[str, str] | None = None) -> Container:
    container = Container(image, userimage.run_options(values), command, env or {})
    containers.append(container)
    return container


def test_values_run_the_learner_unprivileged(values: dict[str, object]) -> None:
    """What the values file sets, read as docker options: non-root, no capabilities, no escalation, a limit."""
    options = userimage.run_options(values)
    assert options[:2] == ["--user", "1000:100"]
    assert "--cap-drop=ALL" in options and not [o for o in options if o.startswith("--cap-add")]
    assert "no-new-privileges" in options and "--privileged" not in options
    single = values["singleuser"]
    assert isinstance(single, dict)
    limit = userimage.memory_bytes(single["memory"]["limit"])
    assert f"--memory={limit}" in options and f"--memory-swap={limit}" in options
    assert single["uid"] == 1000 and single["allowPrivilegeEscalation"] is False
    assert values["cull"] == {"enabled": True, "timeout": 3600, "every": 600}


def test_memory_figures_read_as_kubespawner_reads_them() -> None:
    assert userimage.memory_bytes("1536M") == 1536 * 2**20
    assert userimage.memory_bytes("1.5G") == 1536 * 2**20
    assert userimage.memory_bytes(1000) == 1000
    with pytest.raises(Exception, match="not a memory figure"):
        userimage.memory_bytes("2Gi")


@pytest.mark.image
def test_a_learner_brings_up_a_lab_runs_notebook_00_and_down_leaves_nothing(
        containers: list[Container], image: str, values: dict[str, object]) -> None:
    container = start(containers, image, values, ["sleep", "infinity"])
    seen = container.inspect()
    host = seen["HostConfig"]
    assert isinstance(host, dict)
    single = values["singleuser"]
    assert isinstance(single, dict)
    assert host["Privileged"] is False and host["CapDrop"] == ["ALL"] and not host["CapAdd"]
    assert "no-new-privileges" in host["SecurityOpt"]
    assert host["Memory"] == userimage.memory_bytes(single["memory"]["limit"]) == host["MemorySwap"]
    status = container.exec("cat", "/proc/self/status").stdout
    assert container.exec("id", "-u").stdout.strip() == "1000"
    assert "CapEff:\t0000000000000000" in status and "NoNewPrivs:\t1" in status, status

    # As the hub starts a learner's server: the values' postStart hook copies the notebooks into the home.
    hook = single["lifecycleHooks"]["postStart"]["exec"]["command"]
    container.exec(*hook)
    container.exec("test", "-f", f"/home/jovyan/notebooks/{NOTEBOOK}")

    up = container.exec("krmcourse", "up", "welcome")
    assert "welcome" in up.stdout + up.stderr
    running = container.processes()
    assert any("kube-apiserver" in p for p in running) and any("etcd" in p for p in running), running
    # The notebook, as "Run All" runs it, with the solutions applied as the suite applies them.
    container.exec("jupyter", "nbconvert", "--to", "notebook", "--execute", "--ExecutePreprocessor.timeout=600",
                   "--output", "/tmp/00-run.ipynb", f"/home/jovyan/notebooks/{NOTEBOOK}",
                   env={"KRMCOURSE_SOLUTIONS": "apply"})
    ran = json.loads(container.exec("cat", "/tmp/00-run.ipynb").stdout)
    errors = [o for c in ran["cells"] for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors and any(c.get("outputs") for c in ran["cells"]), errors
    peak = container.memory_peak()
    print(f"memory peak of the container through up and notebook 00: {peak and peak / 2**20:.0f} MiB")

    container.exec("krmcourse", "down", "welcome")
    left = [p for p in container.processes() if not p.startswith(IDLE)]
    assert not left, f"processes left after down: {left}"
    folders = container.exec("sh", "-c", f"ls -A {STATE}/kwok/clusters {STATE}/labs 2>/dev/null; true").stdout
    assert not [line for line in folders.splitlines() if line and not line.endswith(":")], folders
    assert container.inspect()["State"]["OOMKilled"] is False


#: JupyterHub's configuration for the test's hub: a spawner that starts the image as KubeSpawner would a
#: pod (the values' options, the hub's environment for the server, ``singleuser.cmd``), but with
#: ``docker run`` on this machine's network, so that the server and the hub reach each other on 127.0.0.1.
HUB_CONFIG = """
import asyncio, json, subprocess
from jupyterhub.spawner import Spawner
from traitlets import Unicode


class ImageSpawner(Spawner):
    container = Unicode("")

    def load_state(self, state):
        super().load_state(state)
        self.container = state.get("container", "")

    def get_state(self):
        return {{**super().get_state(), "container": self.container}}

    def clear_state(self):
        super().clear_state()
        self.container = ""

    async def start(self):
        env = [f"--env={{k}}={{v}}" for k, v in self.get_env().items()]
        argv = ["docker", "run", "--detach", "--network=host", "--label=krmcourse.test={label}", *{options!r},
                *env, {image!r}, *self.cmd, *self.get_args()]
        done = await asyncio.to_thread(subprocess.run, argv, capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(done.stderr)
        self.container = done.stdout.strip()
        return ("127.0.0.1", self.port)

    async def poll(self):
        if not self.container:
            return 0
        done = await asyncio.to_thread(subprocess.run, ["docker", "inspect", "--format", "{{{{.State.Running}}}}",
                                                        self.container], capture_output=True, text=True)
        return None if done.stdout.strip() == "true" else 1

    async def stop(self, now=False):
        if self.container:
            await asyncio.to_thread(subprocess.run, ["docker", "rm", "--force", "--volumes", self.container],
                                    capture_output=True)


c.JupyterHub.spawner_class = ImageSpawner
c.JupyterHub.bind_url = "http://127.0.0.1:{proxy_port}"
c.JupyterHub.hub_bind_url = "http://127.0.0.1:{hub_port}"
c.JupyterHub.db_url = "sqlite:///{folder}/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = "{folder}/cookie_secret"
c.JupyterHub.cleanup_servers = True
c.ConfigurableHTTPProxy.command = [{proxy!r}]
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{api_port}"
c.ConfigurableHTTPProxy.pid_file = "{folder}/proxy.pid"
c.JupyterHub.services = [{{"name": "test", "api_token": {token!r}}}]
c.JupyterHub.load_roles = [{{"name": "admin", "services": ["test"]}}]
c.Authenticator.allowed_users = {{"learner"}}
c.Spawner.cmd = {cmd!r}
c.Spawner.ip = "127.0.0.1"
c.Spawner.port = {server_port}
c.Spawner.env_keep = []
c.Spawner.start_timeout = 300
c.Spawner.http_timeout = 300
"""


def hub_api(url: str, token: str, method: str = "GET", path: str = "") -> tuple[int, object]:
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url + path, method=method, headers={"Authorization": f"token {token}"},
                                     data=b"{}" if method == "POST" else None)
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            body = answer.read()
            return answer.status, json.loads(body) if body else None
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace")


@pytest.mark.image
def test_a_real_hub_starts_the_image_and_serves_jupyterlab_through_it(
        image: str, values: dict[str, object], tmp_path: Path) -> None:
    """JupyterHub 6.1.1 with its proxy, on 127.0.0.1, starts a learner's server from the image under the
    values' options; the server reports to the hub, which routes the learner's requests to it; stopping
    the server removes the container."""
    from krmcourse import hub
    from krmcourse.providers.kwok import free_ports

    if not hub.proxy_command().exists() or not (hub.wheelhouse() / ".requirements").is_file():
        pytest.fail(f"The hub's downloads are not in {hub.downloads_dir()}: run 'krmcourse hub prepare' "
                    "(./course install does it, as root).", pytrace=False)
    venv = tmp_path / "hub-venv"
    subprocess.run([hub.DEFAULT_PYTHON, "-m", "venv", str(venv)], check=True)
    jupyterhub = next(r for r in hub.requirements() if r.startswith("jupyterhub"))
    subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", "--no-index", "--find-links",
                    str(hub.wheelhouse()), jupyterhub], check=True, timeout=600)
    single = values["singleuser"]
    assert isinstance(single, dict)
    label, token = f"image-hub-{secrets.token_hex(4)}", secrets.token_hex(32)
    proxy_port, hub_port, api_port, server_port = free_ports(4)
    config = tmp_path / "jupyterhub_config.py"
    config.write_text(HUB_CONFIG.format(label=label, options=userimage.run_options(values), image=image,
                                        proxy_port=proxy_port, hub_port=hub_port, api_port=api_port,
                                        server_port=server_port, folder=tmp_path, proxy=str(hub.proxy_command()),
                                        token=token, cmd=[single["cmd"]]))
    log = tmp_path / "jupyterhub.log"
    with open(log, "w") as out:
        process = subprocess.Popen([str(venv / "bin" / "jupyterhub"), "-f", str(config)], cwd=tmp_path,
                                   stdout=out, stderr=subprocess.STDOUT, env={"PATH": f"{venv / 'bin'}:/usr/bin:/bin",
                                                                               "HOME": str(tmp_path)})
    url = f"http://127.0.0.1:{proxy_port}/"
    try:
        deadline = time.monotonic() + 180
        while "JupyterHub is now running" not in log.read_text():
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)  # a poll interval: the hub is starting
        api = f"{url}hub/api/"
        # (the hub made the learner from its allowed users)
        assert hub_api(api, token, "POST", "users/learner/server")[0] in (201, 202)
        deadline, server = time.monotonic() + 300, {}
        while not server.get("ready"):
            status, user = hub_api(api, token, path="users/learner")
            assert status == 200 and isinstance(user, dict), user
            server = user.get("servers", {}).get("", {})
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(1)  # a poll interval: the server is starting
        containers = docker("ps", "--quiet", "--filter", f"label=krmcourse.test={label}").stdout.split()
        assert len(containers) == 1
        seen = json.loads(docker("inspect", containers[0]).stdout)[0]
        assert seen["Config"]["User"] == "1000:100" and seen["HostConfig"]["CapDrop"] == ["ALL"]
        assert seen["Config"]["Entrypoint"] == ["tini", "-g", "--"] and seen["Config"]["Cmd"][0] == single["cmd"]
        made_by = json.loads(docker("image", "inspect", image).stdout)[0]["Config"]
        assert made_by["Cmd"] == ["jupyterhub-singleuser"]  # the image's own command, if z2jh's cmd is null
        # The learner's own token, through the hub's proxy, to their server: the server asks the hub who it is.
        status, made = hub_api(api, token, "POST", "users/learner/tokens")
        assert status == 201 and isinstance(made, dict), made
        status, answer = hub_api(url, made["token"], path="user/learner/api/status")
        assert status == 200 and isinstance(answer, dict) and "started" in answer, answer
        status, answer = hub_api(url, secrets.token_hex(16), path="user/learner/api/status")
        assert status == 403, (status, answer)
        assert hub_api(api, token, "DELETE", "users/learner/server")[0] in (202, 204)
        deadline = time.monotonic() + 120
        while docker("ps", "--all", "--quiet", "--filter", f"label=krmcourse.test={label}").stdout.split():
            assert time.monotonic() < deadline, "the stopped server's container is still there"
            time.sleep(0.5)  # a poll interval: the spawner removes it
    finally:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
        proxy_pid = tmp_path / "proxy.pid"
        if proxy_pid.is_file():
            subprocess.run(["kill", proxy_pid.read_text().strip()], capture_output=True)
        for left in docker("ps", "--all", "--quiet", "--filter", f"label=krmcourse.test={label}").stdout.split():
            docker("rm", "--force", "--volumes", left, check=False)
