"""Reference controller for the job-like lab: each Backup runs once, in a batch/v1 Job, to a final outcome.

The contract it keeps (and the notebook tests):
  * Like a batch/v1 Job, a Backup reports conditions, not a phase: Running while its Job runs, then
    Complete or Failed, which are terminal. Once either is True, this controller never writes to the
    Backup again, whatever it sees later (a late Job event, a deleted Job, its own restart). That is
    the controller half of "monotonic"; the CRD's transition rules (exercise terminal-is-final) are
    the API-server half that also stops everyone else.
  * The Job has a name derived from the Backup, so a controller killed between "create Job" and
    "write status" finds the same Job on restart instead of starting the backup twice.
  * The Job, not the controller, runs the work; the controller only translates its outcome.
"""

from __future__ import annotations

import time
from typing import Any

import kr8s
from kr8s.objects import APIObject, Job

from krmcourse.conditions import condition, merge_conditions
from krmcourse.controllerkit import controller_ref
from krmcourse.passloop import log, objects, put_status, raw, run

BACKUPS = "backups.joblike.krmcourse.dev"
TERMINAL = ("Complete", "Failed")  # condition types, as on a batch/v1 Job
PROBE_LABEL = "joblike.krmcourse.dev/probe"


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def job_for(backup: dict[str, Any]) -> dict[str, Any]:
    """The Job that performs one Backup, owned by it (so deleting the Backup cleans the Job up)."""
    meta = backup["metadata"]
    simulate = backup["spec"].get("simulate", {})
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"backup-{meta['name']}",
            "namespace": meta["namespace"],
            "labels": {"joblike.krmcourse.dev/backup": meta["name"]},
            "ownerReferences": [controller_ref(backup, "joblike.krmcourse.dev/v1", "Backup")],
        },
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {
                    "annotations": {
                        "kwok.krmcourse.dev/outcome": simulate.get("outcome", "Succeeded"),
                        "kwok.krmcourse.dev/after": simulate.get("after", "3s"),
                    }
                },
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "dump",
                            "image": "registry.example/pause:3.10",
                            "args": ["pg_dump", backup["spec"]["database"]],
                        }
                    ],
                },
            },
        },
    }


def job_outcome(job: dict[str, Any]) -> tuple[str, str] | None:
    """How the Job ended, ('Succeeded'|'Failed', message), else None; the Backup says Complete or Failed."""
    for cond in job.get("status", {}).get("conditions", []):
        if cond.get("status") == "True" and cond.get("type") in ("Complete", "Failed"):
            result = "Succeeded" if cond["type"] == "Complete" else "Failed"
            return result, cond.get("message") or cond.get("reason") or cond["type"]
    return None


def finished(status: dict[str, Any]) -> str | None:
    """The terminal condition type that is True ('Complete' or 'Failed'), or None while not finished."""
    for cond in status.get("conditions", []):
        if cond.get("type") in TERMINAL and cond.get("status") == "True":
            return str(cond["type"])
    return None


def running(status: dict[str, Any]) -> bool:
    return any(c.get("type") == "Running" and c.get("status") == "True" for c in status.get("conditions", []))


def write(
    obj: APIObject, backup: dict[str, Any], outcome: str | None, reason: str, message: str, **fields: Any
) -> None:
    """Running=True while outcome is None; else Running=False and the outcome's condition ('Complete'|'Failed')."""
    old = backup.get("status", {})
    generation = backup["metadata"].get("generation")
    conds = [condition("Running", outcome is None, reason, message, generation)]
    if outcome:
        conds.append(condition(outcome, True, reason, message, generation))
    status = {
        **old,
        **fields,
        "observedGeneration": generation,
        "conditions": merge_conditions(old.get("conditions", []), conds),
    }
    put_status(obj, status)
    log.info("Backup %s/%s -> %s (%s)", obj.namespace, obj.name, outcome or "Running", reason)


def reconcile(api: kr8s.Api, obj: APIObject) -> None:
    backup = raw(obj)
    status = backup.get("status", {})
    if finished(status) or backup["metadata"].get("labels", {}).get(PROBE_LABEL):
        return  # final: nothing that happens later may change it
    wanted = job_for(backup)
    found = list(api.get("jobs.batch", wanted["metadata"]["name"], namespace=obj.namespace))
    if not found:
        if status.get("jobName"):
            write(
                obj,
                backup,
                "Failed",
                "JobLost",
                "the Job disappeared before it finished",
                completionTime=now(),
            )
            return
        job = Job(wanted, api=api)
        try:
            job.create()
        except kr8s.ServerError as exc:  # created by a previous run that died before writing status
            if exc.response is None or exc.response.status_code != 409:
                raise
        write(
            obj,
            backup,
            None,
            "JobCreated",
            f"Job {wanted['metadata']['name']} is running",
            jobName=wanted["metadata"]["name"],
            startTime=now(),
        )
        return
    outcome = job_outcome(raw(found[0]))
    if outcome is None:
        if not running(status):
            write(
                obj,
                backup,
                None,
                "JobRunning",
                f"Job {wanted['metadata']['name']} is running",
                jobName=wanted["metadata"]["name"],
                startTime=status.get("startTime") or now(),
            )
        return
    result, message = outcome
    kind = "Complete" if result == "Succeeded" else "Failed"
    write(
        obj,
        backup,
        kind,
        "Job" + kind,
        message,
        jobName=wanted["metadata"]["name"],
        completionTime=now(),
    )


def reconcile_all(api: kr8s.Api) -> None:
    for obj in objects(api, BACKUPS):
        reconcile(api, obj)


if __name__ == "__main__":
    # Jobs are watched too: a Job finishing is what moves a Backup on, and nothing else would wake us.
    run("backup-controller", reconcile_all, watch=[BACKUPS, "jobs.batch"])
