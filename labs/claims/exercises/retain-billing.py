"""Exercise: pg-billing must survive the deletion of the claim that uses it."""

from krmcourse import CheckFailed, Lab


def check(lab: Lab) -> None:
    db = lab.get("databases.claims.krmcourse.dev", "pg-billing")
    if db is None:
        raise CheckFailed("Database pg-billing is gone, and its data with it; reset the lab and try again.")
    policy = db["spec"].get("reclaimPolicy")
    if policy != "Retain":
        raise CheckFailed(
            f"pg-billing has reclaimPolicy {policy}: the binder deletes it when its claim goes."
        )


def solve(lab: Lab) -> None:
    lab.kubectl(
        "patch",
        "databases.claims.krmcourse.dev",
        "pg-billing",
        "--type=merge",
        "-p",
        '{"spec": {"reclaimPolicy": "Retain"}}',
    )
