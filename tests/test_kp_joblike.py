"""KP4 on a real cluster: a Backup's terminal condition survives late events, restarts, SIGKILL and clients.

The cluster runs with labs/job-like/kwok-stages.yaml, so the Jobs' pods succeed or fail on cue.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from krmcourse import Lab
from krmcourse.errors import KubectlError
from krmcourse.labcode import lab_module

LAB_NAME = "job-like"  # the lab fixture (conftest) brings it up for this module
LAB_INSTANCE = "kp-test"

pytestmark = [pytest.mark.cluster, pytest.mark.every_provider]
joblab = lab_module("job-like", "joblab")


@pytest.fixture
def controller(lab: Lab) -> Iterator:
    ctl = lab.start("backup-controller")
    yield ctl
    ctl.stop()


def test_stages_make_job_pods_fail_on_cue(lab: Lab) -> None:
    assert joblab.job_finishing_on_cue(lab, "t-ok", "Succeeded") == "Complete"
    assert joblab.job_finishing_on_cue(lab, "t-bad", "Failed") == "Failed"


def test_terminal_conditions_survive_late_events_and_restarts(lab: Lab, controller) -> None:
    joblab.backup(lab, "t-good", "Succeeded", after="1s")
    joblab.backup(lab, "t-fail", "Failed", after="1s")
    lab.wait_until(
        lambda: joblab.conditions(lab, "t-good").get("Complete") == "True"
        and joblab.conditions(lab, "t-fail").get("Failed") == "True",
        timeout=60,
        message="the backups did not finish",
    )
    before = {n: joblab.get(lab, n)["metadata"]["resourceVersion"] for n in ("t-good", "t-fail")}
    for name in ("t-good", "t-fail"):  # late event: the Jobs vanish after the fact
        lab.delete("job", f"backup-{name}", namespace="shop")
    controller.restart()
    # The restarted controller's first pass read every Backup with its Job gone: it has had its chance.
    controller.wait_for_log("first pass done", timeout=60)
    assert {n: joblab.get(lab, n)["metadata"]["resourceVersion"] for n in before} == before
    assert lab.get("job", "backup-t-good", namespace="shop") is None  # not started again


def test_controller_killed_mid_backup_converges_once(lab: Lab, controller) -> None:
    joblab.backup(lab, "t-killed", "Succeeded", after="3s")
    lab.wait_until(
        lambda: joblab.conditions(lab, "t-killed").get("Running") == "True", timeout=30, message="never started"
    )
    controller.kill()
    # The Job finishes while nobody watches: the restarted controller must learn it from its first list.
    lab.wait_for("job/backup-t-killed", "condition=Complete", namespace="shop", timeout=60)
    controller.restart()
    lab.wait_until(
        lambda: joblab.conditions(lab, "t-killed").get("Complete") == "True",
        timeout=60,
        message="did not converge",
    )
    jobs = lab.kubectl(
        "get", "jobs", "-n", "shop", "-l", "joblike.krmcourse.dev/backup=t-killed", "-o", "name"
    )
    assert jobs.split() == ["job.batch/backup-t-killed"]


def test_api_server_refuses_to_leave_terminal_once_the_rule_is_in(lab: Lab) -> None:
    joblab.backup(lab, "t-client", "Succeeded", after="1s")
    patch = [
        "patch",
        "backups.joblike.krmcourse.dev",
        "t-client",
        "-n",
        "shop",
        "--subresource=status",
        "--type=merge",
    ]
    done = {"status": {"conditions": [{"type": "Complete", "status": "True", "reason": "Test"}]}}
    again = {"status": {"conditions": [{"type": "Running", "status": "True", "reason": "Test"}]}}
    lab.kubectl(*patch, "-p", json.dumps(done))
    lab.kubectl(*patch, "-p", json.dumps(again), "--dry-run=server")  # no rule yet
    lab.solve("terminal-is-final")
    with pytest.raises(KubectlError, match="final"):
        lab.kubectl(*patch, "-p", json.dumps(again))
    assert joblab.conditions(lab, "t-client") == {"Complete": "True"}
    lab.kubectl(*patch, "-p", json.dumps(done))  # rewriting the same terminal status is still allowed
