"""Exercise: ask for a bucket with nothing but a name.

The check reads three things: the Bucket ``team-a/photos`` exists, the YAML it was applied from had no
spec fields (the values come from the CRD's defaults), and the provisioner reports Ready while the
cloud really holds the bucket.
"""

from __future__ import annotations

from collections.abc import Callable

from krmcourse import CheckFailed, Lab

NAME = "photos"


def check(lab: Lab) -> None:
    sup = lab.support("provisioner_support")
    obj = sup.bucket(lab, NAME)
    if obj is None:
        raise CheckFailed(f"There is no Bucket called {NAME} in the {sup.TEAM} namespace yet.")
    written = sup.spec_written_by_hand(lab, obj)
    if written:
        raise CheckFailed(f"The Bucket {NAME} was written with spec fields ({', '.join(written)}). "
                          "The point is to write none and let the defaults fill them in.")
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


def solve(lab: Lab) -> None:
    sup = lab.support("provisioner_support")
    sup.ensure_running(lab)
    lab.apply(
        {
            "apiVersion": "storage.krmcourse.dev/v1alpha1",
            "kind": "Bucket",
            "metadata": {"name": NAME, "namespace": sup.TEAM},
        }
    )
    sup.wait_ready(lab, NAME)


def _spell_out_the_defaults(lab: Lab) -> None:
    """Write the default values into the spec: the same Bucket, but not a succinct request."""
    sup = lab.support("provisioner_support")
    sup.ensure_running(lab)
    lab.kubectl("apply", "-f", "-", input=(
        "apiVersion: storage.krmcourse.dev/v1alpha1\nkind: Bucket\n"
        f"metadata: {{name: {NAME}, namespace: {sup.TEAM}}}\nspec: {{storageClass: STANDARD}}\n"))
    sup.wait_ready(lab, NAME)


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {"spell the defaults out in the spec": _spell_out_the_defaults}
