"""Exercise: mark CacheClass standard as the cluster's default class."""

import json

from krmcourse import CheckFailed, Lab

ANNOTATION = "classes.krmcourse.dev/is-default-class"


def check(lab: Lab) -> None:
    classes = json.loads(lab.kubectl("get", "cacheclasses.classes.krmcourse.dev", "-o", "json"))["items"]
    marked = sorted(
        c["metadata"]["name"]
        for c in classes
        if c["metadata"].get("annotations", {}).get(ANNOTATION) == "true"
    )
    if not marked:
        raise CheckFailed("No CacheClass is marked as the default yet.")
    if marked != ["standard"]:
        raise CheckFailed(f"The default mark is on {marked}; it belongs on standard alone.")


def solve(lab: Lab) -> None:
    lab.kubectl(
        "annotate", "cacheclasses.classes.krmcourse.dev", "standard", f"{ANNOTATION}=true", "--overwrite"
    )
