"""Exercise: mark CacheClass standard as the cluster's default class."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from krmcourse import CheckFailed, Lab

ANNOTATION = "classes.krmcourse.dev/is-default-class"
CLASSES = "cacheclasses.classes.krmcourse.dev"


def check(lab: Lab) -> None:
    classes = lab.objects(CLASSES)
    marked = sorted(
        c["metadata"]["name"]
        for c in classes
        if c["metadata"].get("annotations", {}).get(ANNOTATION) == "true"
    )
    if not marked:
        raise CheckFailed("No CacheClass is marked as the default yet." + _near_misses(classes))
    if marked != ["standard"]:
        raise CheckFailed(f"The default mark is on {marked}; it belongs on standard alone.")


def _near_misses(classes: list[dict[str, Any]]) -> str:
    """What looks like a default mark but is not the one the class rules read, said in a sentence."""
    found = []
    for cls in classes:
        meta = cls["metadata"]
        for where in ("labels", "annotations"):
            for key, value in (meta.get(where) or {}).items():
                if key.endswith("is-default-class") and (where, key, value) != ("annotations", ANNOTATION, "true"):
                    found.append(f"{meta['name']} has the {where[:-1]} {key}={value}")
    if not found:
        return ""
    return (f" ({'; '.join(found)}: the rules in controllers/classes.py read only the annotation {ANNOTATION}, "
            "with the value \"true\".)")


def solve(lab: Lab) -> None:
    lab.kubectl("annotate", CLASSES, "standard", f"{ANNOTATION}=true", "--overwrite")


def _label_it(lab: Lab) -> None:
    """Put the mark on standard as a label instead of an annotation."""
    lab.kubectl("label", CLASSES, "standard", f"{ANNOTATION}=true", "--overwrite")


def _use_the_storageclass_key(lab: Lab) -> None:
    """Copy StorageClass's default annotation, key and all, onto standard."""
    lab.kubectl("annotate", CLASSES, "standard", "storageclass.kubernetes.io/is-default-class=true", "--overwrite")


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "a label instead of the annotation": _label_it,
    "StorageClass's annotation key": _use_the_storageclass_key,
}
