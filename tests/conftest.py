"""Shared test set-up: an isolated krmcourse state folder, and helpers for cluster tests.

Every test run keeps its clusters in a fresh state folder (KRMCOURSE_HOME), so it never touches a
learner's running labs; the toolchain cache is shared, because building it is the slow part. Notebook
kernels started by nbval inherit the same environment.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

# Each test process (and each pytest-xdist worker) gets its own state folder, so clusters of the same
# lab started by a notebook and by a test in parallel never meet. Set KRMCOURSE_HOME to opt out.
_OWN_HOME = "KRMCOURSE_HOME" not in os.environ or "_KRMCOURSE_TEST_HOME" in os.environ
if _OWN_HOME:
    _worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    os.environ["KRMCOURSE_HOME"] = tempfile.mkdtemp(prefix=f"krmcourse-test-{_worker}-")
    os.environ["_KRMCOURSE_TEST_HOME"] = "1"

ROOT = Path(__file__).resolve().parent.parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from krmcourse import toolchain

    if toolchain.is_installed():
        return
    skip = pytest.mark.skip(reason="the lab toolchain is not built: run 'krmcourse toolchain install' "
                                   "(./course test does it for you)")
    for item in items:
        if "cluster" in item.keywords or item.path.suffix == ".ipynb":
            item.add_marker(skip)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Take down any cluster a failed test left behind, and remove the run's state folder."""
    if not _OWN_HOME:
        return
    from krmcourse.paths import state_dir
    from krmcourse.providers.kwok import KwokProvider

    provider = KwokProvider()
    for cluster in provider.clusters():
        provider.delete(cluster)
    shutil.rmtree(state_dir(), ignore_errors=True)


@pytest.fixture(scope="session")
def sandbox() -> Iterator:
    """One running sandbox cluster shared by the tests that only read or add objects."""
    from krmcourse import Lab

    lab = Lab("sandbox", instance="shared").up()
    yield lab
    lab.down()


@pytest.fixture
def namespace(sandbox, request: pytest.FixtureRequest) -> Iterator[str]:
    """A namespace per test in the shared sandbox, deleted afterwards."""
    name = "t-" + request.node.name.lower().replace("_", "-")[:50].strip("-")
    sandbox.kubectl("create", "namespace", name)
    yield name
    sandbox.kubectl("delete", "namespace", name, "--wait=false")
