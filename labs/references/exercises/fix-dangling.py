"""Exercise: Website web/gallery must refer to a Bucket that exists."""

import json
from types import ModuleType

from krmcourse import CheckFailed, Lab


def _rules(lab: Lab) -> ModuleType:
    """The controller's own rules (controllers/references.py)."""
    return lab.support("controllers.references")


def check(lab: Lab) -> None:
    gallery = lab.get("websites.refs.krmcourse.dev", "gallery", namespace="web")
    if gallery is None:
        raise CheckFailed(
            "Website web/gallery is gone; the point is to repair its reference, not to remove it."
        )
    buckets = json.loads(lab.kubectl("get", "buckets.refs.krmcourse.dev", "-n", "web", "-o", "json"))["items"]
    ok, reason, message = _rules(lab).resolution(gallery, buckets)
    if not ok:
        raise CheckFailed(f"gallery's bucketRef does not resolve: {reason}: {message}.")


def solve(lab: Lab) -> None:
    lab.kubectl(
        "patch",
        "websites.refs.krmcourse.dev",
        "gallery",
        "-n",
        "web",
        "--type=merge",
        "-p",
        '{"spec": {"bucketRef": {"name": "media"}}}',
    )
