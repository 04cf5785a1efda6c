"""Exercise: PVC db/data must go away, through the protection rather than around it."""

from collections.abc import Callable

from krmcourse import CheckFailed, Lab


def check(lab: Lab) -> None:
    pvc = lab.get("pvc", "data", namespace="db")
    if pvc is None:
        if lab.get("pod", "postgres", namespace="db") is not None:
            raise CheckFailed("PVC db/data is gone while Pod postgres still uses it: its protection finalizer "
                              "was taken off by hand, around the protection rather than through it. "
                              "'krmcourse reset references --at release-pvc' brings both back.")
        return
    if pvc["metadata"].get("deletionTimestamp"):
        raise CheckFailed("PVC db/data is Terminating: something still uses it, so its protection holds it.")
    raise CheckFailed("PVC db/data still exists.")


def solve(lab: Lab) -> None:
    lab.delete("pod", "postgres", namespace="db")
    lab.kubectl("delete", "pvc", "data", "-n", "db", "--ignore-not-found", "--wait=false")
    lab.wait_until(
        lambda: lab.get("pvc", "data", namespace="db") is None,
        timeout=60,
        message="PVC db/data stayed after its Pod was gone",
    )


def _strip_the_protection(lab: Lab) -> None:
    """Delete the claim, then take kubernetes.io/pvc-protection off it while the Pod still uses it."""
    lab.kubectl("delete", "pvc", "data", "-n", "db", "--wait=false")
    # The protection holds a claim only for Pods that are scheduled: right after a reset the Pod may not be
    # yet, and the claim goes at once. It is gone around the protection either way, so a patch that finds
    # nothing is fine.
    lab.kubectl("patch", "pvc", "data", "-n", "db", "--type=merge", "-p", '{"metadata": {"finalizers": null}}',
                check=False)
    lab.wait_until(lambda: lab.get("pvc", "data", namespace="db") is None, timeout=30,
                   message="PVC db/data is still there")


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {"remove the protection finalizer by hand": _strip_the_protection}
