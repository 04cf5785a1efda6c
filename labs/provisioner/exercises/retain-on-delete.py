"""Exercise: delete the Bucket object ``archive`` but keep the data in the cloud.

The check wants the object gone from Kubernetes and the cloud bucket ``team-a-archive`` still there.
Deleting with the default policy makes the provisioner's finalizer remove the cloud bucket first.
"""

from __future__ import annotations

from krmcourse import CheckFailed, Lab

NAME = "archive"


def check(lab: Lab) -> None:
    sup = lab.support("provisioner_support")
    if sup.bucket(lab, NAME) is not None:
        raise CheckFailed(f"The Bucket object {NAME} still exists in {sup.TEAM}.")
    cloud_name = f"{sup.TEAM}-{NAME}"
    try:
        found = sup.cloud(lab).get_bucket(cloud_name)
    except Exception as exc:  # noqa: BLE001 - any failure to ask the cloud means we cannot confirm
        raise CheckFailed(f"Could not ask the cloud about {cloud_name}: {exc}") from exc
    if found is None:
        raise CheckFailed(
            f"The cloud has no bucket {cloud_name}: the data went with the object. "
            f"Create the Bucket {NAME} again, wait for Ready, and look at its spec before "
            "deleting it."
        )


def solve(lab: Lab) -> None:
    sup = lab.support("provisioner_support")
    sup.ensure_running(lab)
    sup.wait_ready(lab, NAME)
    lab.kubectl(
        "patch",
        "bucket",
        NAME,
        "-n",
        sup.TEAM,
        "--type=merge",
        "-p",
        '{"spec": {"deletionPolicy": "Retain"}}',
    )
    lab.delete("bucket", NAME, namespace=sup.TEAM, wait=True)
