"""Exercise: Website web/gallery must refer to a Bucket that exists."""

import importlib.util
import json
import sys
from types import ModuleType

from krmcourse import CheckFailed, Lab


def _rules(lab: Lab) -> ModuleType:
    name = "refs_rules_for_checks"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, lab.path / "controllers" / "references.py")
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


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
