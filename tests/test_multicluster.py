"""The multi-cluster lab's controller: clusters join and leave while it runs, a removed cluster's watch
really ends on that cluster's API server (with the let-go step of the exercise's reference solution), and
after a SIGKILL the controller converges on restart."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from krmcourse.labcode import lab_module

pytestmark = pytest.mark.every_provider

LAB = Path(__file__).resolve().parent.parent / "labs" / "multi-cluster"


def _run_fleet(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(LAB / "controllers" / "fleet.py"), *args],
                          capture_output=True, text=True, timeout=60)


def test_a_bad_membership_folder_is_a_clear_error(tmp_path: Path) -> None:
    step = tmp_path / "let_go.py"
    step.write_text("def let_go(fleet, name):\n    fleet.members.pop(name)\n")
    done = _run_fleet("--clusters", str(tmp_path / "nowhere"), "--let-go", str(step))
    assert done.returncode == 2
    assert "is not a folder" in done.stderr and "create it" in done.stderr


def test_a_let_go_file_without_the_step_is_a_clear_error(tmp_path: Path) -> None:
    step = tmp_path / "let_go.py"
    step.write_text("def forget(fleet, name):\n    pass\n")
    done = _run_fleet("--clusters", str(tmp_path), "--let-go", str(step))
    assert done.returncode == 2
    assert "does not define a function let_go(fleet, name)" in done.stderr and "lab.save_code" in done.stderr


@pytest.fixture(scope="module")
def clusters() -> Iterator[tuple]:
    from krmcourse import Lab

    east = Lab("multi-cluster", instance="t-east").up()
    west = Lab("multi-cluster", instance="t-west").up()
    try:
        yield east, west
    finally:
        east.down()
        west.down()


@pytest.fixture(scope="module")
def fl(clusters) -> ModuleType:  # noqa: ANN001
    return lab_module("multi-cluster", "fleet_lab")


@pytest.fixture
def fleet(clusters, fl) -> Iterator:  # noqa: ANN001
    """The fleet controller, hosted by the east lab with the exercise's reference let-go step, no member yet."""
    clusters[0].solve("let-a-cluster-go")
    run = fl.FleetRun(clusters[0])  # adopts the controller that solve started
    yield run
    run.stop()


@pytest.mark.cluster
def test_join_mirror_leave_and_watches_end(clusters, fl, fleet) -> None:  # noqa: ANN001
    east, west = clusters
    fleet.join("east", east.kubeconfig)
    before = fl.configmap_watches(west)
    fleet.join("west", west.kubeconfig)
    # The join returns once west is listed; its watch may reach west's API server a moment later.
    joined = east.wait_until(lambda: (n := fl.configmap_watches(west)) > before and n, timeout=15)
    assert joined > before
    fl.put_source(east, "alpha", x="1")
    fl.put_source(west, "beta", y="2")
    fleet.wait_copies(west, {"east-alpha"})
    fleet.wait_copies(east, {"west-beta"})
    keys = set(fleet.actions()["key"])
    assert {"east|fleet/alpha", "west|fleet/beta"} <= keys
    fleet.leave("west")
    assert east.wait_until(lambda: fl.configmap_watches(west) < joined, timeout=15)
    fleet.wait_copies(east, set(), absent={"west-beta"})


@pytest.mark.cluster
def test_converges_after_sigkill(clusters, fl, fleet) -> None:  # noqa: ANN001
    east, west = clusters
    fleet.join("east", east.kubeconfig)
    fleet.join("west", west.kubeconfig)
    for i in range(5):
        fl.put_source(east, f"item-{i}", n=str(i))
    fleet.kill()  # mid-work: some copies may exist, some not
    east.delete("configmap", "item-0", namespace="fleet")
    fl.put_source(east, "item-0b", n="new")
    fl.put_source(east, "item-1", n="changed")
    fleet.restart()
    copies = fleet.wait_copies(west, {"east-item-0b", "east-item-1", "east-item-4"}, absent={"east-item-0"})
    assert east.wait_until(lambda: fl.copies(west).get("east-item-1") == {"n": "changed"}, timeout=20)
    assert copies["east-item-0b"] == {"n": "new"}
