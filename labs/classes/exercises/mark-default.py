"""Exercise: make CacheClass standard the cluster's one default class.

An earlier admin left three classes behind (``classlab.hand_over``), with names drawn per cluster: one of them
already carries the default mark, and another a look-alike that the class rules ignore. Which is which is
drawn too, so the page cannot say; the learner finds the mark on the cluster (and with it the exact key the
rules read), moves it to ``standard``, and leaves no other class marked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from krmcourse import CheckFailed, Lab

ANNOTATION = "classes.krmcourse.dev/is-default-class"
CLASSES = "cacheclasses.classes.krmcourse.dev"


def check(lab: Lab) -> None:
    if not lab.support("classlab").handed_over(lab):
        raise CheckFailed("The classes the earlier admin left are not in the cluster yet: the exercise's first "
                          "cell (the hand-over) has not run since the lab started.")
    classes = lab.objects(CLASSES)
    marked = sorted(
        c["metadata"]["name"]
        for c in classes
        if c["metadata"].get("annotations", {}).get(ANNOTATION) == "true"
    )
    if "standard" not in marked:
        raise CheckFailed("standard does not carry the default mark as the class rules read it."
                          + _near_misses(classes))
    if marked != ["standard"]:
        others = len(marked) - 1
        raise CheckFailed(
            f"standard is marked, but {others} other class{'es are' if others > 1 else ' is'} marked as well, "
            "and the rules then take the newest marked class, which is not standard. List every CacheClass "
            "with its annotations to find the old mark.")


def _near_misses(classes: list[dict[str, Any]]) -> str:
    """What looks like a default mark on standard but is not the one the class rules read, in a sentence."""
    found = []
    for cls in classes:
        meta = cls["metadata"]
        if meta["name"] != "standard":
            continue
        for where in ("labels", "annotations"):
            for key, value in (meta.get(where) or {}).items():
                if key.endswith("is-default-class") and (where, key, value) != ("annotations", ANNOTATION, "true"):
                    found.append(f"it has the {where[:-1]} {key}={value}")
    if not found:
        return (" The rules (controllers/classes.py) read one annotation, with the value \"true\"; the class that "
                "is the default today carries it.")
    return (f" ({'; '.join(found)}: the rules in controllers/classes.py read only one annotation, with the value "
            "\"true\", as the class that is the default today carries it.)")


def solve(lab: Lab) -> None:
    lab.support("classlab").hand_over(lab)
    # Which class carries the mark now? Its annotations say, and give the exact key the rules read.
    for cls in lab.objects(CLASSES):
        if cls["metadata"]["name"] != "standard" and ANNOTATION in cls["metadata"].get("annotations", {}):
            lab.kubectl("annotate", CLASSES, cls["metadata"]["name"], f"{ANNOTATION}-")
    lab.kubectl("annotate", CLASSES, "standard", f"{ANNOTATION}=true", "--overwrite")


def _copied_from_the_page(lab: Lab) -> None:
    """The answer the page once gave, word for word: standard annotated, and nothing else looked at."""
    lab.support("classlab").hand_over(lab)
    lab.kubectl("annotate", CLASSES, "standard", f"{ANNOTATION}=true", "--overwrite")


def _unmark_all(lab: Lab) -> None:
    """The hand-over made, then the default mark taken off every class that carries it."""
    lab.support("classlab").hand_over(lab)
    for cls in lab.objects(CLASSES):
        if ANNOTATION in cls["metadata"].get("annotations", {}):
            lab.kubectl("annotate", CLASSES, cls["metadata"]["name"], f"{ANNOTATION}-")


def _label_it(lab: Lab) -> None:
    """Move the mark to standard, but as a label instead of an annotation."""
    _unmark_all(lab)
    lab.kubectl("label", CLASSES, "standard", f"{ANNOTATION}=true", "--overwrite")


def _use_the_storageclass_key(lab: Lab) -> None:
    """Copy StorageClass's default annotation, key and all, onto standard (the old mark removed)."""
    _unmark_all(lab)
    lab.kubectl("annotate", CLASSES, "standard", "storageclass.kubernetes.io/is-default-class=true", "--overwrite")


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "copied from the page: standard annotated, the old mark left in place": _copied_from_the_page,
    "a label instead of the annotation": _label_it,
    "StorageClass's annotation key": _use_the_storageclass_key,
}
