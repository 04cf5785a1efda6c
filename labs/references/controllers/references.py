"""The reference rules of the references lab, shared by the controller and the exercise checks.

A Website refers to a Bucket by name, in its own namespace. A Bucket is in use while any Website
that is not itself being deleted refers to it. A Website's reference resolves when the Bucket
exists and is not being deleted.
"""

from __future__ import annotations

from typing import Any

FINALIZER = "refs.krmcourse.dev/bucket-protection"


def users(bucket: dict[str, Any], websites: list[dict[str, Any]]) -> list[str]:
    """Names of the live Websites that refer to this Bucket (sorted, for a stable status)."""
    ns, name = bucket["metadata"]["namespace"], bucket["metadata"]["name"]
    return sorted(
        w["metadata"]["name"]
        for w in websites
        if w["metadata"]["namespace"] == ns
        and not w["metadata"].get("deletionTimestamp")
        and w.get("spec", {}).get("bucketRef", {}).get("name") == name
    )


def resolution(website: dict[str, Any], buckets: list[dict[str, Any]]) -> tuple[bool, str, str]:
    """(resolved, reason, message) for a Website's bucketRef."""
    ns = website["metadata"]["namespace"]
    name = website.get("spec", {}).get("bucketRef", {}).get("name", "")
    bucket = next(
        (b for b in buckets if b["metadata"]["namespace"] == ns and b["metadata"]["name"] == name), None
    )
    if bucket is None:
        return False, "BucketNotFound", f"Bucket {ns}/{name} does not exist"
    if bucket["metadata"].get("deletionTimestamp"):
        return (
            False,
            "BucketDeleting",
            f"Bucket {ns}/{name} is being deleted; it stays while this Website uses it",
        )
    return True, "BucketFound", f"Bucket {ns}/{name} exists"
