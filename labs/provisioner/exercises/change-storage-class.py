"""Exercise: move the photos bucket to the COLDLINE storage class.

The check compares the declared class with what the cloud reports for the bucket, and wants the
provisioner to have seen the latest generation of the object.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from krmcourse import CheckFailed, Lab

NAME = "photos"
WANTED = "COLDLINE"


def check(lab: Lab) -> None:
    sup = lab.support("provisioner_support")
    obj = sup.bucket(lab, NAME)
    if obj is None:
        raise CheckFailed(f"There is no Bucket {NAME} in {sup.TEAM}; the succinct-bucket exercise makes it.")
    if obj["spec"].get("storageClass") != WANTED:
        raise CheckFailed(
            f"Bucket {NAME} still declares storageClass {obj['spec'].get('storageClass')}, and the spec is "
            "what the provisioner makes the cloud match: a class changed only in the cloud is soon put back."
        )
    cond = sup.ready(obj)
    if cond.get("observedGeneration") != obj["metadata"]["generation"] or cond.get("status") != "True":
        raise CheckFailed(
            f"The provisioner has not caught up with the change to {NAME} yet "
            f"(Ready={cond.get('status')}, reason {cond.get('reason')}). Is it running?"
        )
    try:
        found = sup.cloud(lab).get_bucket(obj["status"]["bucketName"]) or {}
    except Exception as exc:  # noqa: BLE001 - any failure to ask the cloud means we cannot confirm
        raise CheckFailed(f"Could not ask the cloud about the bucket: {exc}") from exc
    if found.get("storageClass") != WANTED:
        raise CheckFailed(f"The cloud says the bucket's class is {found.get('storageClass')}, not {WANTED}.")


def solve(lab: Lab) -> None:
    sup = lab.support("provisioner_support")
    sup.ensure_running(lab)
    lab.kubectl("patch", "bucket", NAME, "-n", sup.TEAM, "--type=merge", "-p",
                json.dumps({"spec": {"storageClass": WANTED}}))
    sup.wait_ready(lab, NAME)


def _change_it_in_the_cloud(lab: Lab) -> None:
    """Set the class in the cloud's own API, as the notebook's drift demo did, and leave the spec alone."""
    sup = lab.support("provisioner_support")
    sup.ensure_running(lab)
    obj = sup.wait_ready(lab, NAME)
    sup.cloud(lab).update_bucket(obj["status"]["bucketName"], storageClass=WANTED)


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "change the class in the cloud, behind the provisioner": _change_it_in_the_cloud,
}
