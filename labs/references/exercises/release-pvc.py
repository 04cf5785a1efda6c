"""Exercise: PVC db/data must go away, through the protection rather than around it.

Two Pods mount the claim: ``postgres``, which the page shows, and a backup Pod that
``reflab.start_nightly_backup`` starts with a name drawn per cluster and printed nowhere. Deleting
``postgres`` (the one obvious command) leaves the claim Terminating: the learner has to find every user
of the claim in the cluster. The check wants the claim gone with no Pod left that mounts it.
"""

from collections.abc import Callable

from krmcourse import CheckFailed, Lab


def check(lab: Lab) -> None:
    reflab = lab.support("reflab")
    if not reflab.backup_started(lab):
        raise CheckFailed("The nightly backup has not started yet: the notebook's cell that starts it "
                          "(after the lab comes up) has not run since the lab started.")
    pvc = lab.get("pvc", "data", namespace="db")
    users = reflab.claim_users(lab)
    if pvc is None:
        if users:
            raise CheckFailed(f"PVC db/data is gone while {len(users)} Pod(s) still mount it: its protection "
                              "finalizer was taken off by hand, around the protection rather than through it. "
                              "'krmcourse reset references --at release-pvc' brings them back.")
        return
    if pvc["metadata"].get("deletionTimestamp"):
        raise CheckFailed(
            "PVC db/data is Terminating: a scheduled Pod still mounts it, so its protection holds it. "
            "The Pod you know of may not be its only user; the claim's description (kubectl describe) lists "
            "the Pods that use it, and so do the Pods' own volumes.")
    raise CheckFailed("PVC db/data still exists.")


def solve(lab: Lab) -> None:
    reflab = lab.support("reflab")
    reflab.start_nightly_backup(lab)
    for pod in reflab.claim_users(lab):  # every Pod that mounts the claim, not only postgres
        lab.delete("pod", pod, namespace="db")
    lab.kubectl("delete", "pvc", "data", "-n", "db", "--ignore-not-found", "--wait=false")
    lab.wait_until(
        lambda: lab.get("pvc", "data", namespace="db") is None,
        timeout=60,
        message="PVC db/data stayed after its Pods were gone",
    )


def _delete_postgres(lab: Lab) -> None:
    """The answer the page once gave: delete the claim and Pod postgres, the one user the page names."""
    lab.support("reflab").start_nightly_backup(lab)
    lab.kubectl("delete", "pvc", "data", "-n", "db", "--wait=false")
    lab.delete("pod", "postgres", namespace="db")


def _strip_the_protection(lab: Lab) -> None:
    """Delete the claim, then take kubernetes.io/pvc-protection off it while a Pod still uses it."""
    lab.support("reflab").start_nightly_backup(lab)
    lab.kubectl("delete", "pvc", "data", "-n", "db", "--wait=false", "--ignore-not-found")
    lab.kubectl("patch", "pvc", "data", "-n", "db", "--type=merge", "-p", '{"metadata": {"finalizers": null}}',
                check=False)
    lab.wait_until(lambda: lab.get("pvc", "data", namespace="db") is None, timeout=30,
                   message="PVC db/data is still there")


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "copied from the page: delete the claim and Pod postgres": _delete_postgres,
    "remove the protection finalizer by hand": _strip_the_protection,
}
