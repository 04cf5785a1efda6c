"""The user image for a hub on Kubernetes (z2jh), run here as the values file says a learner's pod runs.

``krmcourse image build`` makes the image (or finds one of the same content); each test starts a
container of it with ``docker run`` under the options :func:`krmcourse.userimage.run_options` reads from
``deploy/z2jh/values.yaml``: uid 1000 in group 100, every capability dropped, no privilege escalation,
the memory limit, no swap. Inside, a learner's lab comes up, notebook 00 runs, and ``krmcourse down``
leaves no process and no folder of the lab; the image's own entry point, ``jupyterhub-singleuser``,
serves. Every container is removed at the end, failed or not. See tests/README.md, "The image test".
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


@pytest.mark.image
def test_the_entry_point_starts_jupyterhub_singleuser(
        containers: list[Container], image: str, values: dict[str, object]) -> None:
    """The image's own command, with the environment KubeSpawner gives it, starts JupyterLab as the hub's
    single-user server and asks for its hub where KubeSpawner said. No hub runs here, so after its retries
    it exits 1 (which the test does not wait for): that a hub then serves it was not run here."""
    prefix = "/user/learner/"
    api = "http://127.0.0.1:8081/hub/api"
    env = {"JUPYTERHUB_API_TOKEN": secrets.token_hex(16), "JUPYTERHUB_API_URL": api,
           "JUPYTERHUB_BASE_URL": "/", "JUPYTERHUB_SERVICE_PREFIX": prefix, "JUPYTERHUB_USER": "learner",
           "JUPYTERHUB_CLIENT_ID": "jupyterhub-user-learner", "JUPYTERHUB_HOST": "",
           "JUPYTERHUB_OAUTH_CALLBACK_URL": f"{prefix}oauth_callback",
           "JUPYTERHUB_SERVICE_URL": f"http://0.0.0.0:8888{prefix}"}
    container = start(containers, image, values, [], env)
    config = container.inspect()["Config"]
    assert isinstance(config, dict)
    assert config["Entrypoint"] == ["tini", "-g", "--"] and config["Cmd"] == ["jupyterhub-singleuser"]
    wanted = ["jupyterhub single-user server extension version", "jupyterlab | extension was successfully linked",
              f"Failed to connect to my Hub at {api}"]
    deadline, log = time.monotonic() + 300, ""
    while time.monotonic() < deadline and not all(w in log for w in wanted):
        log = docker("logs", container.id).stderr
        time.sleep(1)  # a poll interval: the server is starting
    assert all(w in log for w in wanted), log[-3000:]
    server = [p for p in container.processes() if "jupyterhub-singleuser" in p]
    assert server, container.processes()
    assert container.exec("id", "-u").stdout.strip() == "1000"
