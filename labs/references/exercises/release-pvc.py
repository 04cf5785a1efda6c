"""Exercise: PVC db/data must go away, through the protection rather than around it."""

from krmcourse import CheckFailed, Lab


def check(lab: Lab) -> None:
    pvc = lab.get("pvc", "data", namespace="db")
    if pvc is None:
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
