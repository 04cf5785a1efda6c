"""What the good-citizens lab promises beyond its exercises and notebook: the Widget controller
converges after a SIGKILL mid-work, and it refuses bad switches with a clear error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

LAB_NAME = "good-citizens"  # the lab fixture (conftest) brings it up for this module

LAB = Path(__file__).resolve().parent.parent / "labs" / "good-citizens"


def test_unknown_loop_is_a_clear_error() -> None:
    done = subprocess.run([sys.executable, str(LAB / "controllers" / "widgetctl.py"), "--loops", "bogus"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "--loops takes configmap and/or tally, not bogus" in done.stderr


@pytest.fixture(scope="module")
def gc(lab) -> ModuleType:  # noqa: ANN001
    return lab.support("good_citizens")


@pytest.mark.cluster
def test_widget_controller_converges_after_sigkill(lab, gc) -> None:  # noqa: ANN001
    from krmcourse.apiload import RestClient

    rest = RestClient(lab.kubeconfig)
    run = gc.run_id("kill")
    try:
        names = gc.make_widgets(rest, run, 8)
        ctl = gc.start_widgets(lab, run, "--watch-children", "--requeue-after")
        ctl.proc.kill()  # mid-work: right after its cache synced, before it could finish
        gc.change_sizes(rest, names, 4, 0.0)  # changes it cannot see while dead
        ctl.proc.start()
        gc.settle(lab, rest, run, quiet=0.0)
        rest.call("DELETE", f"{gc.CONFIGMAPS}/{names[0]}-widget")  # drift after the restart is repaired too
        gc.settle(lab, rest, run, quiet=0.0)
        assert gc.children_match(rest, run)
        ctl.stop()
    finally:
        rest.close()
