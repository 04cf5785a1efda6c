"""Exercise: delete the Bucket object ``archive`` but keep the data in the cloud.

The check wants the object gone from Kubernetes and the cloud bucket ``team-a-archive`` still there.
Deleting with the default policy makes the provisioner's finalizer remove the cloud bucket first.
"""

from __future__ import annotations

from collections.abc import Callable

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
    if not _retained(lab, sup.TEAM):
        raise CheckFailed(
            f"The Bucket {NAME} is gone and {cloud_name} is still there, but the provisioner never released "
            "it with deletionPolicy Retain (it records that as an Event, reason Retained). Removing the "
            "finalizer by hand skips the provisioner: with the default policy the data would only have "
            f"survived by luck. Create the Bucket {NAME} again, wait for Ready, and delete it the way the "
            "API offers."
        )


def _retained(lab: Lab, namespace: str) -> bool:
    """Whether the provisioner said it kept the cloud bucket of Bucket ``archive`` when it released it."""
    selector = f"involvedObject.kind=Bucket,involvedObject.name={NAME},reason=Retained"
    return bool(lab.objects("events", namespace, field_selector=selector))


def solve(lab: Lab) -> None:
    sup = lab.support("provisioner_support")
    sup.ensure_running(lab)
    if sup.bucket(lab, NAME) is None:  # deleted some other way: ask for it again (the cloud bucket is reused)
        lab.apply(lab.path / "manifests" / "30-buckets.yaml")
    sup.wait_ready(lab, NAME)
    lab.kubectl("patch", "bucket", NAME, "-n", sup.TEAM, "--type=merge", "-p", '{"spec": {"deletionPolicy": "Retain"}}')
    lab.delete("bucket", NAME, namespace=sup.TEAM, wait=True)


def _strip_the_finalizer(lab: Lab) -> None:
    """Delete it, then take the provisioner's finalizer off while the provisioner is stopped."""
    sup = lab.support("provisioner_support")
    sup.ensure_running(lab)
    sup.wait_ready(lab, NAME)
    sup.start_provisioner(lab).stop()  # the provisioner only: the cloud keeps the data either way
    lab.delete("bucket", NAME, namespace=sup.TEAM, wait=False)
    lab.kubectl("patch", "bucket", NAME, "-n", sup.TEAM, "--type=merge", "-p", '{"metadata": {"finalizers": null}}')
    lab.wait_until(lambda: sup.bucket(lab, NAME) is None, timeout=30, message=f"Bucket {NAME} is still there")


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {"remove the finalizer by hand": _strip_the_finalizer}
