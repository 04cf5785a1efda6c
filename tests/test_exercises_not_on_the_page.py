"""No exercise may be answered from the page: the answer lives in the cluster.

Issue 33 lists exercises that the notebook once answered: the cell above named the value, the key, or the
one object to act on, so copying it passed the check. Each rewritten exercise draws what matters per lab
cluster (names, sizes, which object carries a mark) or hides a second fact the page does not give, and
lists the answer a learner would copy from the old page in its ``WRONG``, under a description starting
with :data:`COPIED`. Here, for each of them:

that ``WRONG`` entry exists, and the exercise's prompt (its Markdown cells up to the first check) no longer
names what the copied answer used. On a cluster, ``tests/test_exercises.py`` applies every ``WRONG`` entry,
the copied answers among them, and needs the check to refuse each with a hint.

On the code before the rewrite, each copied answer passed its check (the prompt gave it word for word).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from krmcourse import Lab, exercises

COPIED = "copied from the page"
NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"

#: (lab, exercise) -> words the prompt must no longer contain: what the copied answer took from the page.
REWRITTEN: dict[tuple[str, str], tuple[str, ...]] = {
    ("claims", "retain-billing"): ("pg-billing",),
    ("classes", "mark-default"): ("classes.krmcourse.dev/is-default-class",),
    ("references", "release-pvc"): (),  # the page names one user of the claim; the other is drawn
    ("references", "fix-dangling"): ("`media`", "`images`"),
    ("provisioner", "succinct-bucket"): ("nothing but a name", "no `spec` at all"),
    ("provisioner", "change-storage-class"): ("COLDLINE",),
    ("cluster-scoped-twins", "team-policy"): ("team-a-registries", "teams.example.com/team-a/tools"),
    ("controllers", "fix-condition"): ("`hola` reports",),
    ("one-loop-per-pattern", "fix-the-signal"): ("reads 14 items",),
    ("composite", "orphan-children"): ("Delete the WebApp so that the children stay",),
    ("controller-patterns", "pattern-quiz"): ("Eight needs", "in an order drawn for it"),
}

#: Listed in issue 33, section 2, and not rewritten yet: each fails here until it is.
NOT_YET: list[tuple[str, str]] = []


def copied_answers(lab: Lab, exercise: str) -> dict[str, object]:
    wrong = getattr(exercises.load(lab, exercise), "WRONG", {})
    return {what: fn for what, fn in wrong.items() if what.startswith(COPIED)}


def prompt(lab: Lab, exercise: str) -> str:
    """The Markdown of the exercise's prompt: the Markdown cells after the previous check, up to its first."""
    notebook = json.loads((NOTEBOOKS / lab.spec.notebook).read_text())
    cells = notebook["cells"]
    first = next(i for i, c in enumerate(cells)
                 if c["cell_type"] == "code" and f'lab.check("{exercise}")' in "".join(c["source"]))
    start = max((i for i, c in enumerate(cells[:first])
                 if c["cell_type"] == "code" and 'lab.check("' in "".join(c["source"])), default=-1) + 1
    return "\n".join("".join(c["source"]) for c in cells[start:first] if c["cell_type"] == "markdown")


def _rewritten(not_yet: bool = True) -> list[object]:
    done = [pytest.param(lab, ex, id=f"{lab}/{ex}") for lab, ex in REWRITTEN]
    pending = [pytest.param(lab, ex, id=f"{lab}/{ex}", marks=pytest.mark.xfail(
        strict=True, reason="issue 33: not rewritten yet, its page still answers it")) for lab, ex in NOT_YET]
    return done + (pending if not_yet else [])


@pytest.mark.parametrize(("name", "exercise"), _rewritten())
def test_the_answer_copied_from_the_page_is_listed_and_the_page_no_longer_gives_it(name: str, exercise: str) -> None:
    lab = Lab(name, say=lambda _m: None)
    assert copied_answers(lab, exercise), (
        f"{name}/{exercise}: its WRONG must list the answer a learner would copy from the page, under a "
        f"description starting {COPIED!r}")
    text = prompt(lab, exercise)
    for words in REWRITTEN.get((name, exercise), ()):
        assert words not in text, f"{name}/{exercise}: the prompt still gives {words!r}:\n{text}"

