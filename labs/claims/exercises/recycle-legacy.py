"""Exercise: make the Released Database pg-legacy available to new claims again (recycling)."""

from krmcourse import CheckFailed, Lab


def check(lab: Lab) -> None:
    db = lab.get("databases.claims.krmcourse.dev", "pg-legacy")
    if db is None:
        raise CheckFailed("pg-legacy was deleted; recycling keeps the Database and only releases it.")
    if db["metadata"].get("deletionTimestamp"):
        raise CheckFailed("pg-legacy is being deleted; recycling keeps the Database and only releases it.")
    ref = db["spec"].get("claimRef")
    if ref and ref.get("name") == "old-orders":
        raise CheckFailed(
            "pg-legacy still records its old claim team-b/old-orders, so no new claim can bind it."
        )


def solve(lab: Lab) -> None:
    lab.kubectl(
        "patch",
        "databases.claims.krmcourse.dev",
        "pg-legacy",
        "--type=json",
        "-p",
        '[{"op": "remove", "path": "/spec/claimRef"}]',
    )
