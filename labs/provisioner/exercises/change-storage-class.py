"""Exercise: move the photos bucket to the storage class the team now asks for.

The team changes its request (``provisioner_support.change_class``): a new storage class, drawn per lab
cluster and written into the ConfigMap ``team-a/photos-request``; never COLDLINE, the class the page once
named. The check compares the declared class with the request and with what the cloud reports for the
bucket, and wants the provisioner to have seen the latest generation of the object.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from krmcourse import CheckFailed, Lab

NAME = "photos"


def check(lab: Lab) -> None:
    sup = lab.support("provisioner_support")
    data = (lab.get("configmap", sup.REQUEST, namespace=sup.TEAM) or {}).get("data") or {}
    if "changedFrom" not in data:
        raise CheckFailed(f"The team has not changed its request yet: the exercise's first cell does, in the "
                          f"ConfigMap {sup.REQUEST}, and it has not run since the lab started.")
    wanted = data["storageClass"]
    obj = sup.bucket(lab, NAME)
    if obj is None:
        raise CheckFailed(f"There is no Bucket {NAME} in {sup.TEAM}; the succinct-bucket exercise makes it.")
    declared = obj["spec"].get("storageClass")
    if declared != wanted:
        raise CheckFailed(
            f"Bucket {NAME} declares storageClass {declared}, which is not the class the team's request now asks "
            f"for (the request is in the ConfigMap {sup.REQUEST}). The spec is what the provisioner makes the "
            "cloud match: a class changed only in the cloud is soon put back."
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
    if found.get("storageClass") != wanted:
        raise CheckFailed(f"The cloud says the bucket's class is {found.get('storageClass')}, not {declared}.")


def solve(lab: Lab) -> None:
    sup = lab.support("provisioner_support")
    sup.ensure_running(lab)
    sup.change_class(lab)
    # The class the team asks for now is in its request.
    wanted = lab.get("configmap", sup.REQUEST, namespace=sup.TEAM)["data"]["storageClass"]
    lab.kubectl("patch", "bucket", NAME, "-n", sup.TEAM, "--type=merge", "-p",
                json.dumps({"spec": {"storageClass": wanted}}))
    sup.wait_ready(lab, NAME)


def _coldline(lab: Lab) -> None:
    """The answer the page once gave, word for word: photos moved to COLDLINE."""
    sup = lab.support("provisioner_support")
    sup.ensure_running(lab)
    sup.change_class(lab)
    lab.kubectl("patch", "bucket", NAME, "-n", sup.TEAM, "--type=merge", "-p",
                json.dumps({"spec": {"storageClass": "COLDLINE"}}))
    sup.wait_ready(lab, NAME)


def _change_it_in_the_cloud(lab: Lab) -> None:
    """Set the requested class in the cloud's own API, as the notebook's drift demo did, and leave the spec."""
    sup = lab.support("provisioner_support")
    sup.ensure_running(lab)
    wanted = sup.change_class(lab)
    obj = sup.wait_ready(lab, NAME)
    sup.cloud(lab).update_bucket(obj["status"]["bucketName"], storageClass=wanted)


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "copied from the page: photos moved to COLDLINE": _coldline,
    "change the class in the cloud, behind the provisioner": _change_it_in_the_cloud,
}
