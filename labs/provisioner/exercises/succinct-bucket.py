"""Exercise: ask for the bucket the team needs, writing nothing the defaults already say.

The team's request (``provisioner_support.file_request``: the ConfigMap ``team-a/photos-request``) is drawn per
lab cluster: some of what it asks for is the CRD's default, some is not. The check reads four things: the
Bucket ``team-a/photos`` has what the request asks for; the YAML it was applied from wrote none of the fields
whose value is the default (the CRD fills those in); and the provisioner reports Ready while the cloud really
holds the bucket. A Bucket with nothing but a name (as the notebook's demonstration makes one) gets the
defaults only, which the request never is; one with every field spelled out is not succinct.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from krmcourse import CheckFailed, Lab

NAME = "photos"


def check(lab: Lab) -> None:
    sup = lab.support("provisioner_support")
    wanted = sup.request(lab)
    if not wanted:
        raise CheckFailed(f"The team has not filed its request yet: the exercise's first cell writes it into the "
                          f"ConfigMap {sup.REQUEST} in {sup.TEAM}, and it has not run since the lab started.")
    obj = sup.bucket(lab, NAME)
    if obj is None:
        raise CheckFailed(f"There is no Bucket called {NAME} in the {sup.TEAM} namespace yet.")
    spec = obj.get("spec") or {}
    classes = {wanted["storageClass"], ((lab.get("configmap", sup.REQUEST, namespace=sup.TEAM) or {})
                                        .get("data") or {}).get("changedFrom", wanted["storageClass"])}
    off = [k for k in sup.DEFAULTS
           if (spec.get(k) not in classes if k == "storageClass" else spec.get(k) != wanted[k])]
    if off:
        raise CheckFailed(f"Bucket {NAME} does not have what the team asked for (its {', '.join(off)} "
                          f"differ{'s' if len(off) == 1 else ''}). The request is in the ConfigMap {sup.REQUEST}; a "
                          "field that cannot change (such as location) needs a new Bucket.")
    written = sup.spec_written_by_hand(lab, obj)
    spelled = [k for k in written if k in sup.DEFAULTS and spec.get(k) == sup.DEFAULTS[k]]
    if spelled:
        raise CheckFailed(f"The Bucket {NAME} was written with spec fields whose value is the default "
                          f"({', '.join(spelled)}). Write only what differs from the defaults, and let the CRD fill "
                          "in the rest (kubectl explain shows each default).")
    cond = sup.ready(obj)
    if cond.get("status") != "True":
        raise CheckFailed(
            f"Bucket {NAME} is not Ready (reason: {cond.get('reason', 'no status yet')}). "
            "Is the provisioner running, and is the cloud up?"
        )
    try:
        found = sup.cloud(lab).get_bucket(obj["status"]["bucketName"])
    except Exception as exc:  # noqa: BLE001 - any failure to ask the cloud means we cannot confirm
        raise CheckFailed(f"Could not ask the cloud about the bucket: {exc}") from exc
    if found is None:
        raise CheckFailed(
            f"Bucket {NAME} says Ready, but the cloud has no bucket {obj['status']['bucketName']}."
        )


def _apply(lab: Lab, spec: dict[str, Any] | None) -> None:
    sup = lab.support("provisioner_support")
    body: dict[str, Any] = {"apiVersion": "storage.krmcourse.dev/v1alpha1", "kind": "Bucket",
                            "metadata": {"name": NAME, "namespace": sup.TEAM}}
    if spec is not None:
        body["spec"] = spec
    lab.kubectl("apply", "-f", "-", input=json.dumps(body))


def solve(lab: Lab) -> None:
    sup = lab.support("provisioner_support")
    sup.ensure_running(lab)
    wanted = sup.file_request(lab)  # the ConfigMap photos-request, as the team wrote it
    # Only what differs from the CRD's defaults (kubectl explain bucket.spec shows them) goes into the spec.
    spec = {k: v for k, v in wanted.items() if v != sup.DEFAULTS[k]}
    old = sup.bucket(lab, NAME)
    if old is not None and old["spec"].get("location") != wanted["location"]:  # an earlier try: location is fixed
        lab.delete("bucket", NAME, namespace=sup.TEAM)
    _apply(lab, spec)
    sup.wait_ready(lab, NAME)


def _name_only(lab: Lab) -> None:
    """What the notebook's demonstration cell does: a Bucket with nothing but its name."""
    sup = lab.support("provisioner_support")
    sup.ensure_running(lab)
    sup.file_request(lab)
    _apply(lab, None)
    sup.wait_ready(lab, NAME)


def _spell_out_everything(lab: Lab) -> None:
    """Write every field of the request into the spec, the defaults too: the right Bucket, not a succinct one."""
    sup = lab.support("provisioner_support")
    sup.ensure_running(lab)
    wanted = sup.file_request(lab)
    old = sup.bucket(lab, NAME)
    if old is not None and old["spec"].get("location") != wanted["location"]:
        lab.delete("bucket", NAME, namespace=sup.TEAM)
    _apply(lab, dict(wanted))
    sup.wait_ready(lab, NAME)


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "copied from the page: a Bucket with nothing but a name": _name_only,
    "spell every field out in the spec, the defaults too": _spell_out_everything,
}
