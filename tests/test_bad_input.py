"""Bad input, case by case: each gets a clear message, the right exit code, and loses or leaves nothing.

Every case runs the real ``krmcourse`` command (or the ``Lab`` API) with a state folder of its own, and
then checks that the folder holds no file: no half-made cluster, kubeconfig, log or lock. The exit
codes are the ones ``krmcourse --help`` lists: 1 a check failed, 2 bad input, 3 toolchain,
4 provider, 5 cluster, 6 kubectl, 7 a wait ran out of time.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from krmcourse import Lab
from krmcourse.errors import KubectlError, LabNotUpError, UnknownExerciseError, UnknownLabError, UsageError, WaitTimeout

pytestmark = pytest.mark.every_provider

ROOT = Path(__file__).resolve().parent.parent
KRMCOURSE = [sys.executable, "-m", "krmcourse.cli"]


def files_in(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if not p.is_dir())


def run(args: list[str], home: Path, env: dict[str, str] | None = None,
        timeout: float = 300) -> subprocess.CompletedProcess:
    full = {**os.environ, "KRMCOURSE_HOME": str(home), **(env or {})}
    return subprocess.run([*KRMCOURSE, *args], capture_output=True, text=True, env=full, timeout=timeout)


@dataclass
class Case:
    args: list[str]
    code: int
    says: list[str]
    #: Prepares the case in a temporary folder; returns environment variables for the command.
    setup: Callable[[Path], dict[str, str]] = field(default=lambda _: {})


CHECK_ONLY = "def check(lab):\n    pass\n"
#: What every command that needs a lab's cluster says when the lab is down (Lab.require_up).
NOT_UP = ["Lab composite is not up.", "Run 'krmcourse up composite' first."]


def exercise_file(lab: Path) -> Path:
    return lab / "exercises" / "hello-namespace.py"


def labs_copy(tmp: Path, edit: Callable[[Path], None]) -> dict[str, str]:
    """A copy of the welcome lab, changed by ``edit``, as the only lab of KRMCOURSE_LABS."""
    shutil.copytree(ROOT / "labs" / "welcome", tmp / "labs" / "welcome")
    edit(tmp / "labs" / "welcome")
    return {"KRMCOURSE_LABS": str(tmp / "labs")}


def edit_yaml(old: str, new: str) -> Callable[[Path], None]:
    def edit(lab: Path) -> None:
        text = (lab / "lab.yaml").read_text()
        assert old in text, f"the case no longer fits lab.yaml: {old!r} is not in it"
        (lab / "lab.yaml").write_text(text.replace(old, new, 1))
    return edit


def no_toolchain(tmp: Path) -> dict[str, str]:
    """No built toolchain, no Go to build one with, and Go not to be fetched from PyPI either."""
    bare = tmp / "bin"
    bare.mkdir()
    for tool in ("sh", "env"):
        if found := shutil.which(tool):
            (bare / tool).symlink_to(found)
    return {"KRMCOURSE_CACHE": str(tmp / "empty-cache"), "PATH": str(bare), "KRMCOURSE_PROVIDER": "kwok",
            "KRMCOURSE_GO_FROM_PYPI": "off"}


CASES = {
    "unknown lab": Case(["up", "nosuch"], 2, ["no lab called 'nosuch'", "krmcourse list"]),
    "misspelt lab": Case(["up", "welcom"], 2, ["Did you mean 'welcome'?"]),
    "unknown lab for down": Case(["down", "nosuch"], 2, ["no lab called 'nosuch'"]),
    "down without a lab": Case(["down"], 2, ["Name a lab", "--all"]),
    "unknown lab for kubectl": Case(["kubectl", "nosuch", "--", "get", "pods"], 2, ["no lab called 'nosuch'"]),
    "unknown lab for env": Case(["env", "nosuch"], 2, ["no lab called 'nosuch'"]),
    "unknown lab for reset": Case(["reset", "nosuch"], 2, ["no lab called 'nosuch'"]),
    "unknown lab for status": Case(["status", "nosuch"], 2, ["no lab called 'nosuch'"]),
    "unknown lab for exercises": Case(["exercises", "nosuch"], 2, ["no lab called 'nosuch'"]),
    "unknown exercise for check": Case(["check", "welcome", "nosuch"], 2, ["no exercise 'nosuch'", "hello-namespace"]),
    "unknown exercise for solve": Case(["solve", "welcome", "nosuch"], 2, ["no exercise 'nosuch'"]),
    "misspelt exercise": Case(["check", "welcome", "hello-namspace"], 2, ["Did you mean 'hello-namespace'?"]),
    "unknown exercise for up --at": Case(["up", "welcome", "--at", "nosuch"], 2, ["no exercise 'nosuch'"]),
    "unknown exercise for reset --at": Case(["reset", "welcome", "--at", "nosuch"], 2, ["no exercise 'nosuch'"]),
    "invalid instance name": Case(["up", "sandbox", "--instance", "Bad_Name"], 2, ["Instance name 'Bad_Name'"]),
    "port out of range": Case(["up", "welcome", "--port", "99999"], 2, ["'99999' is not a port"]),
    "port that is not a number": Case(["start", "--port", "eighty"], 2, ["'eighty' is not a port"]),
    "unknown command": Case(["launch"], 2, ["invalid choice: 'launch'"]),
    "unknown provider": Case(["up", "welcome"], 2, ["Unknown provider 'podman'", "kwok, kind"],
                             lambda _: {"KRMCOURSE_PROVIDER": "podman"}),
    "kind with no engine": Case(["up", "welcome"], 4, ["engine is not running", "KRMCOURSE_PROVIDER=kwok"],
                                lambda _: {"KRMCOURSE_PROVIDER": "kind", "DOCKER_HOST": "unix:///nonexistent.sock"}),
    "missing toolchain and no Go": Case(["up", "welcome"], 3, ["Install Go", "building it now"], no_toolchain),
    "toolchain install without Go": Case(["toolchain", "install"], 3, ["Install Go"], no_toolchain),
    "lab.yaml that is not YAML": Case(["exercises", "welcome"], 2, ["lab.yaml is not valid YAML"],
                                      lambda t: labs_copy(t, lambda lab: (lab / "lab.yaml").write_text("title: [\n"))),
    "lab.yaml minutes as words": Case(["exercises", "welcome"], 2, ["lab.yaml: 'minutes' must give whole minutes"],
                                      lambda t: labs_copy(t, edit_yaml("minutes: {", "minutes: ten\nold: {"))),
    "lab.yaml with a wrong concept": Case(["list"], 2, ["not concept IDs", "K9X"],
                                          lambda t: labs_copy(t, edit_yaml("concepts: [", "concepts: [K9X, "))),
    "lab.yaml controller without a name": Case(
        ["exercises", "welcome"], 2, ["needs a 'name' of lowercase words"],
        lambda t: labs_copy(t, edit_yaml("\nexercises:", "\ncontrollers: [{script: gone.py}]\nexercises:"))),
    "lab.yaml controller with a bare account": Case(
        ["exercises", "welcome"], 2, ["'serviceaccount' must be written namespace/name"],
        lambda t: labs_copy(t, edit_yaml("\nexercises:", "\ncontrollers: [{name: greeter, script: lab.yaml, "
                                                          "serviceaccount: greeter}]\nexercises:"))),
    "lab.yaml controller facing a fault there is not": Case(
        ["exercises", "welcome"], 2, ["'faces' must list faults", "410 Gone", "meteor strike"],
        lambda t: labs_copy(t, edit_yaml("\nexercises:", "\ncontrollers: [{name: greeter, script: lab.yaml, "
                                                          "converges: {apply: lab.yaml, until: [{resource: ns/x, "
                                                          "for: condition=Ready}], faces: [meteor strike]}}]\n"
                                                          "exercises:"))),
    "logs of a controller the lab never ran": Case(["logs", "welcome", "greeter"], 2,
                                                   ["has no process called 'greeter'"]),
    "exercise without its file": Case(["check", "welcome", "hello-namespace"], 2,
                                      ["has no file", "check() and solve()"],
                                      lambda t: labs_copy(t, lambda lab: exercise_file(lab).unlink())),
    "exercise without solve()": Case(["solve", "welcome", "hello-namespace"], 2, ["does not define solve(lab)"],
                                     lambda t: labs_copy(t, lambda lab: exercise_file(lab).write_text(CHECK_ONLY))),
    "new lab with an invalid name": Case(["new-lab", "Bad_Name", "--concepts", "K2"], 2, ["cannot name a lab"]),
    "new lab that exists": Case(["new-lab", "welcome", "--concepts", "K2"], 2, ["a lab called 'welcome' already"]),
    # Every command that needs the lab's cluster, on a lab that is down: one message, one exit code.
    "env on a lab that is not up": Case(["env", "composite"], 5, NOT_UP),
    "kubectl on a lab that is not up": Case(["kubectl", "composite", "--", "get", "pods"], 5, NOT_UP),
    "check on a lab that is not up": Case(["check", "composite", "orphan-children"], 5, NOT_UP),
    "solve on a lab that is not up": Case(["solve", "composite", "orphan-children"], 5, NOT_UP),
    "check on an instance that is not up": Case(
        ["check", "composite", "orphan-children", "--instance", "east"], 5,
        ["Lab composite (instance east) is not up.", "Run 'krmcourse up composite --instance east' first."]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_on_the_command_line(name: str, tmp_path: Path) -> None:
    case = CASES[name]
    home = tmp_path / "state"
    env = case.setup(tmp_path)
    result = run(case.args, home, env)
    output = result.stdout + result.stderr
    assert result.returncode == case.code, f"krmcourse {' '.join(case.args)} exited {result.returncode}:\n{output}"
    for text in case.says:
        assert text in output, f"krmcourse {' '.join(case.args)} does not say {text!r}:\n{output}"
    assert "Traceback" not in output, output
    assert not (home.exists() and files_in(home)), f"left behind: {files_in(home)}"


def test_every_command_that_needs_a_cluster_is_tried_on_a_lab_that_is_down() -> None:
    """The commands the parser marks as needing a lab's cluster are exactly those the cases above try
    on a lab that is down, so a new such command joins the matrix."""
    from krmcourse import cli

    commands = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    needing = {name for name, parser in commands.items() if parser.get_default("needs_cluster")}
    tried = {case.args[0] for case in CASES.values() if case.code == 5 and "is not up." in case.says[0]}
    assert needing == tried, f"commands that need a cluster: {sorted(needing)}; tried on a lab that is down: " \
                             f"{sorted(tried)}"
    assert {"env", "kubectl", "check", "solve"} <= needing


def test_the_lab_api_checks_and_solves_only_on_a_lab_that_is_up(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KRMCOURSE_HOME", str(tmp_path / "state"))
    lab = Lab("composite", say=lambda _m: None)
    for step in (lab.check, lab.solve, lab.solved):
        with pytest.raises(LabNotUpError, match="Lab composite is not up") as down:
            step("orphan-children")
        assert down.value.exit_code == 5 and "krmcourse up composite" in down.value.hint
    home = tmp_path / "state"
    assert not (home.exists() and files_in(home)), f"left behind: {files_in(home)}"


def test_bad_input_through_the_lab_api() -> None:
    with pytest.raises(UnknownLabError, match="no lab called 'nosuch'"):
        Lab("nosuch")
    with pytest.raises(UsageError, match="Instance name"):
        Lab("sandbox", instance="Not Valid")
    with pytest.raises(UnknownExerciseError, match="Did you mean 'hello-namespace'"):
        Lab("welcome").check("hello-namespac")
    with pytest.raises(UsageError, match="declares no controller 'greeter'"):
        Lab("welcome").start("greeter")


def test_a_declared_controller_without_its_program_is_refused_before_it_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = labs_copy(tmp_path, edit_yaml("\nexercises:", "\ncontrollers: [{name: greeter, script: gone.py}]\n"
                                                          "exercises:"))
    monkeypatch.setenv("KRMCOURSE_LABS", env["KRMCOURSE_LABS"])
    monkeypatch.setenv("KRMCOURSE_HOME", str(tmp_path / "state"))
    with pytest.raises(UsageError, match="controller greeter's program .*gone.py does not exist") as missing:
        Lab("welcome").start("greeter")
    assert "lab.yaml" in missing.value.hint
    assert not (tmp_path / "state").exists() or not files_in(tmp_path / "state"), "a refused start left files"


# ----------------------------------------------------------------- with a cluster
@pytest.fixture
def own_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    home = tmp_path / "state"
    monkeypatch.setenv("KRMCOURSE_HOME", str(home))
    yield home
    Lab("sandbox").down()
    assert not files_in(home), f"left behind: {files_in(home)}"


@pytest.mark.cluster
def test_a_port_in_use_is_refused_before_anything_starts(own_home: Path, taken_port: int) -> None:
    result = run(["up", "sandbox", "--port", str(taken_port)], own_home)
    assert result.returncode == 4, result.stdout + result.stderr
    assert f"{taken_port}" in result.stderr and "in use" in result.stderr, result.stderr
    assert not Lab("sandbox").status()["exists"]


@pytest.mark.cluster
def test_a_second_up_waits_for_the_first_then_reuses_its_cluster(own_home: Path) -> None:
    env = {**os.environ, "KRMCOURSE_HOME": str(own_home)}
    first = subprocess.Popen([*KRMCOURSE, "up", "sandbox"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, env=env)
    try:
        started = own_home / "labs" / "krm-sandbox"  # the first one is creating the cluster now
        Lab.wait_until(lambda: started.exists() or first.poll() is not None, timeout=120,
                       message="the first up never started creating its cluster")
        assert first.poll() is None, "the first up ended before the second could start"
        second = run(["up", "sandbox"], own_home)
    finally:
        first_output = first.communicate(timeout=600)[0]
    assert first.returncode == 0 and second.returncode == 0, first_output + second.stdout + second.stderr
    assert "is ready in" in first_output, first_output
    assert "waiting for it to finish" in second.stdout, second.stdout
    assert "reusing the running cluster" in second.stdout and "is ready in" not in second.stdout, second.stdout


@pytest.mark.cluster
def test_two_ups_at_once_cannot_both_pass_the_lab_limit(own_home: Path) -> None:
    """A learner who starts two labs at the same moment, with room for one (a workshop hub's limit):
    one comes up and the other is refused, never both."""
    env = {**os.environ, "KRMCOURSE_HOME": str(own_home), "KRMCOURSE_MAX_LABS": "1"}
    ups = [subprocess.Popen([*KRMCOURSE, "up", "sandbox", "--instance", name], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env) for name in ("one", "two")]
    try:
        said = [up.communicate(timeout=600)[0] for up in ups]
        codes = sorted(up.returncode for up in ups)
        assert codes == [0, 2], f"exit codes {codes}:\n" + "\n".join(said)
        refused = said[[up.returncode for up in ups].index(2)]
        assert "the most allowed here (KRMCOURSE_MAX_LABS=1)" in refused, refused
    finally:
        for name in ("one", "two"):
            Lab("sandbox", instance=name).down()


@pytest.mark.cluster
def test_a_kubeconfig_readable_by_others_is_made_private_again(own_home: Path) -> None:
    lab = Lab("sandbox").up()
    lab.kubeconfig.chmod(0o644)
    result = run(["up", "sandbox"], own_home)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "readable by others (mode 644)" in result.stdout, result.stdout
    assert lab.kubeconfig.stat().st_mode & 0o777 == 0o600


@pytest.mark.cluster
def test_an_invalid_resource_is_refused_with_the_api_servers_reason_and_changes_nothing(own_home: Path) -> None:
    lab = Lab("sandbox").up()
    bad = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "Not_A_Name", "namespace": "default"}}
    with pytest.raises(KubectlError) as refused:
        lab.apply(bad)
    assert "Invalid value" in str(refused.value) and "Not_A_Name" in str(refused.value), refused.value
    assert refused.value.exit_code == 6
    assert "validation rejected the object" in refused.value.hint, refused.value.hint
    assert "Not_A_Name" not in lab.kubectl("get", "configmaps", "-n", "default", "-o", "name")


@pytest.mark.cluster
def test_kubectl_failures_say_what_to_do_next(own_home: Path) -> None:
    """The API server's refusals, read by a learner: each KubectlError names a next step."""
    lab = Lab("sandbox").up()
    cases = {
        ("get", "configmap", "no-such-thing"): "check the name and the namespace",
        ("get", "gizmos"): "kubectl api-resources",
        ("create", "namespace", "default"): "kubectl apply' updates it",
        ("get", "secrets", "-n", "kube-system", "--as", "system:serviceaccount:default:default"):
            "kubectl auth can-i",
    }
    for args, next_step in cases.items():
        with pytest.raises(KubectlError) as failed:
            lab.kubectl(*args)
        assert next_step in str(failed.value), f"kubectl {' '.join(args)}: {failed.value}"


def test_a_server_that_never_answers_stops_kubectl_with_a_next_step(tmp_path: Path) -> None:
    """An API server that accepts the connection and then says nothing (one restarting, one frozen)."""
    import socket

    from krmcourse import kubectl

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        config = tmp_path / "kubeconfig"
        config.write_text(f"""apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "http://127.0.0.1:{silent.getsockname()[1]}"}}}}]
contexts: [{{name: c, context: {{cluster: c, user: u}}}}]
current-context: c
users: [{{name: u, user: {{}}}}]
""")
        with pytest.raises(KubectlError) as stopped:
            kubectl.run(config, ["get", "--raw", "/readyz"], timeout=1)
    assert "no answer within 1 s" in str(stopped.value)
    assert "krmcourse status" in stopped.value.hint


def test_a_wait_that_runs_out_says_where_to_look() -> None:
    with pytest.raises(WaitTimeout) as late:
        Lab.wait_until(lambda: False, timeout=0.1, interval=0.05, message="Widget w never became Ready")
    assert isinstance(late.value, TimeoutError) and late.value.exit_code == 7
    assert str(late.value).startswith("Widget w never became Ready (waited 0 s)")
    assert "krmcourse logs LAB NAME" in late.value.hint


@pytest.mark.cluster
def test_a_full_disk_is_refused_before_a_cluster_starts(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a small tmpfs as the full disk")
    disk = tmp_path / "small-disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(disk)], check=True)
    try:
        result = run(["up", "sandbox"], disk / "state")
        assert result.returncode == 5, result.stdout + result.stderr
        assert "MiB free" in result.stderr and "KRMCOURSE_HOME" in result.stderr, result.stderr
        assert not files_in(disk), f"left behind on the full disk: {files_in(disk)}"
    finally:
        subprocess.run(["umount", str(disk)], check=True)
