"""The multi-cluster lab's controller: clusters join and leave while it runs, a removed cluster's watch
really ends on that cluster's API server, and after a SIGKILL the controller converges on restart."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from krmcourse.labcode import lab_module

LAB = Path(__file__).resolve().parent.parent / "labs" / "multi-cluster"


def test_a_bad_membership_folder_is_a_clear_error(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    done = subprocess.run([sys.executable, str(LAB / "controllers" / "fleet.py"), "--clusters", str(missing)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "is not a folder" in done.stderr and "create it" in done.stderr


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
    """The fleet controller, running in the east cluster, with no member yet."""
    run = fl.FleetRun(clusters[0])
    run.start()
    yield run
    run.stop()


@pytest.mark.cluster
def test_join_mirror_leave_and_watches_end(clusters, fl, fleet) -> None:  # noqa: ANN001
    east, west = clusters
    fleet.join("east", east.kubeconfig)
    before = fl.configmap_watches(west)
    fleet.join("west", west.kubeconfig)
    joined = fl.configmap_watches(west)
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
