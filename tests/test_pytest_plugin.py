"""krmcourse as a pytest plugin, used as a project outside the course would use it.

Each test writes a small operator project into a temporary folder (CRDs, a kopf operator, and its tests,
which use only the plugin's fixtures) and runs pytest there in a process of its own, as that project's
author would: the plugin comes from the installed package's ``pytest11`` entry point, not from this suite.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

WIDGET_CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
    - name: v1
      served: true
      storage: true
      subresources: {status: {}}
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec: {type: object, properties: {size: {type: integer}}}
            status: {type: object, properties: {ready: {type: boolean}}}
"""

OPERATOR = """\
import kopf


@kopf.on.startup()
def started(**_):
    print("widget operator ready", flush=True)


@kopf.on.create("example.com", "v1", "widgets")
def made(patch, **_):
    patch.status["ready"] = True
"""

ROOT = Path(__file__).resolve().parent.parent


def readme_example() -> str:
    """The README's example test, between its two markers, as the README shows it."""
    block = (ROOT / "README.md").read_text().split("<!-- pytest-plugin-example -->")[1]
    return block.split("```python\n", 1)[1].split("```", 1)[0]


# The operator's own tests, as its author writes them, with only the plugin's fixtures: the README's
# example first, then what shows that each test starts clean, and the plugin's two ways to say more.
OPERATOR_TESTS = '''\
import kr8s
from pathlib import Path


{example}

def test_2_the_next_test_starts_clean(krm_lab, krm_api):
    assert krm_lab.get("namespace", "team") is None, "the first test's namespace is still there"
    assert list(kr8s.get("widgets.example.com", namespace="all", api=krm_api)) == []


def test_3_a_failing_test_shows_its_controllers_log(krm_lab, krm_controller):
    krm_controller("operator.py", ready="widget operator ready")
    assert False, "failing on purpose"


def test_4_a_controller_left_running_is_stopped_and_named(krm_lab):
    krm_lab.run_controller(Path(__file__).with_name("sleeper.py"), name="forgotten")
'''


def project(root: Path, crds: str | None = WIDGET_CRD) -> Path:
    (root / "tests").mkdir(parents=True)
    (root / "crds").mkdir()
    if crds is not None:
        (root / "crds" / "widgets.yaml").write_text(crds)
    (root / "tests" / "operator.py").write_text(OPERATOR)
    (root / "tests" / "sleeper.py").write_text("import time\n\ntime.sleep(600)\n")
    (root / "tests" / "test_my_operator.py").write_text(OPERATOR_TESTS.replace("{example}", readme_example()))
    (root / "pytest.ini").write_text("[pytest]\nkrm_crds = crds\n")
    return root


def pytest_in(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """pytest in ``root``, in a process of its own, with this run's state folder and provider."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "_KRMCOURSE_TEST"))}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA", *args],
                          cwd=root, env={**clean, **(env or {})}, capture_output=True, text=True, timeout=600)


@pytest.mark.cluster
@pytest.mark.every_provider
def test_a_project_outside_the_course_tests_its_operator_with_the_plugins_fixtures(tmp_path: Path) -> None:
    done = pytest_in(project(tmp_path), "tests/test_my_operator.py")
    said = done.stdout + done.stderr
    # The fourth test passes, and errors as it ends, for the controller it left running.
    assert "1 failed, 3 passed, 1 error" in said, said
    assert "PASSED tests/test_my_operator.py::test_a_widget_becomes_ready" in said, said
    assert "PASSED tests/test_my_operator.py::test_2_the_next_test_starts_clean" in said, said
    # The failing test's report carries the log of the controller it ran.
    assert "controller operator log" in said and "widget operator ready" in said, said
    # A controller the test left running is stopped, and named.
    assert "The test left forgotten running; stopped now." in said, said
    assert "Traceback" not in said, said


@pytest.mark.parametrize(("crds", "ini", "expected"), [
    (WIDGET_CRD, "krm_crds = nowhere", "The CRD folder"),
    ("kind: [unclosed", "krm_crds = crds", "is not valid YAML"),
    ("just: a mapping\n", "krm_crds = crds", "is not a Kubernetes object"),
])
def test_bad_crds_fail_before_a_cluster_starts_and_say_why(tmp_path: Path, crds: str, ini: str,
                                                             expected: str) -> None:
    root = project(tmp_path, crds)
    (root / "pytest.ini").write_text(f"[pytest]\n{ini}\n")
    done = pytest_in(root, "tests/test_my_operator.py", "-k", "test_2")
    said = done.stdout + done.stderr
    assert done.returncode == 1 and expected in said, said
    assert "->" in said and "Traceback" not in said, said


def test_no_usable_provider_is_said_plainly(tmp_path: Path) -> None:
    done = pytest_in(project(tmp_path), "tests/test_my_operator.py", "-k", "test_2",
                     env={"KRMCOURSE_PROVIDER": "kind", "DOCKER_HOST": "unix:///nonexistent/docker.sock"})
    said = done.stdout + done.stderr
    assert done.returncode == 1 and "->" in said and "Traceback" not in said, said
    assert "docker" in said.lower(), said

