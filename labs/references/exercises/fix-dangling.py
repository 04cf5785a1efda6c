"""Exercise: Website web/gallery must refer to a Bucket that exists.

The check resolves gallery's bucketRef with the controller's own rules against the Buckets in web,
whatever gallery's status says. When the reference does not resolve, it also looks for a Bucket of
that name in other namespaces: a bucketRef only reaches the Website's own namespace.
"""

import json
from collections.abc import Callable
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
    buckets = json.loads(lab.kubectl("get", "buckets.refs.krmcourse.dev", "-A", "-o", "json"))["items"]
    ok, reason, message = _rules(lab).resolution(gallery, buckets)
    if not ok:
        wanted = gallery["spec"]["bucketRef"]["name"]
        elsewhere = sorted(b["metadata"]["namespace"] for b in buckets
                           if b["metadata"]["name"] == wanted and b["metadata"]["namespace"] != "web")
        if elsewhere:
            message += f" (there is one in {', '.join(elsewhere)}, but a bucketRef only reaches gallery's namespace)"
        conditions = (gallery.get("status") or {}).get("conditions") or []
        if any(c.get("type") == "BucketResolved" and c.get("status") == "True" for c in conditions):
            message += ". Its status claims BucketResolved=True, but a status reports the state; it cannot make it so"
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


def _write_resolved_into_the_status(lab: Lab) -> None:
    """Make gallery's status say BucketResolved=True, and leave the reference dangling."""
    condition = {"type": "BucketResolved", "status": "True", "reason": "BucketFound",
                 "message": "Bucket web/images exists", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    lab.kubectl("patch", "websites.refs.krmcourse.dev", "gallery", "-n", "web", "--subresource=status",
                "--type=merge", "-p", json.dumps({"status": {"conditions": [condition]}}))


def _create_the_bucket_in_the_default_namespace(lab: Lab) -> None:
    """Create the missing Bucket images, but from a manifest without a namespace: it lands in default."""
    lab.kubectl("apply", "-n", "default", "-f", "-",
                input='{"apiVersion": "refs.krmcourse.dev/v1", "kind": "Bucket", "metadata": {"name": "images"}}')


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "write BucketResolved=True into gallery's status": _write_resolved_into_the_status,
    "create the Bucket images in the default namespace": _create_the_bucket_in_the_default_namespace,
}
