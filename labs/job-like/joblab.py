"""Notebook helpers for the job-like lab: create Backups and Jobs, and read their conditions."""

from __future__ import annotations

from typing import Any

from krmcourse import Lab

BACKUPS = "backups.joblike.krmcourse.dev"


def backup(
    lab: Lab, name: str, outcome: str = "Succeeded", after: str = "3s", namespace: str = "shop"
) -> None:
    """Ask for a backup of database 'orders' whose Job pod will end with ``outcome`` after ``after``."""
    lab.apply(
        {
            "apiVersion": "joblike.krmcourse.dev/v1",
            "kind": "Backup",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"database": "orders", "simulate": {"outcome": outcome, "after": after}},
        }
    )


def get(lab: Lab, name: str, namespace: str = "shop") -> dict[str, Any]:
    return lab.get(BACKUPS, name, namespace=namespace) or {}


def conditions(lab: Lab, name: str, namespace: str = "shop") -> dict[str, str]:
    """A Backup's conditions as {type: status}, for example {"Running": "False", "Complete": "True"}."""
    return {c["type"]: c["status"] for c in get(lab, name, namespace).get("status", {}).get("conditions", [])}


def job_finishing_on_cue(
    lab: Lab, name: str, outcome: str, after: str = "1s", namespace: str = "shop"
) -> str:
    """Run a plain batch/v1 Job whose pod kwok ends on cue; return the Job's final condition type.

    This shows the kwok Stages from kwok-stages.yaml at work, without any controller of ours.
    """
    lab.apply(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "backoffLimit": 0,
                "template": {
                    "metadata": {
                        "annotations": {
                            "kwok.krmcourse.dev/outcome": outcome,
                            "kwok.krmcourse.dev/after": after,
                        }
                    },
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "work", "image": "registry.example/pause:3.10"}],
                    },
                },
            },
        }
    )

    def finished() -> str:
        job = lab.get("job", name, namespace=namespace) or {}
        done = [
            c["type"]
            for c in job.get("status", {}).get("conditions", [])
            if c["type"] in ("Complete", "Failed") and c["status"] == "True"
        ]
        return done[0] if done else ""

    return lab.wait_until(
        finished,
        timeout=60,
        message=(
            f"Job {name} never finished: is the cluster running with labs/job-like/kwok-stages.yaml "
            "(lab.yaml cluster.stages)? With kwok's default Stages, Job pods can never fail."
        ),
    )
