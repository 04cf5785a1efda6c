"""Which controller pattern fits? The Part III taxonomy as code, its quiz, and the grading.

The taxonomy is two questions deep. Does the controller create resources? If it does, they are either
outside KRM (a Provisioner) or inside it (a Composite). If it creates nothing, it either acts on
requests as they arrive (an Enforcer) or keeps acting on objects in steady state (a Governor).

:func:`classify` walks that tree, :data:`QUESTIONS` holds described needs with their answers, and
:func:`grade` marks a set of answers. :func:`quiz_widget` puts the quiz into a notebook; everything
else works without ipywidgets, so the tests and the exercise checks use the same grading.

Notebook 10 grades a quiz as an exercise (``labs/controller-patterns/exercises/pattern-quiz.py``), on
questions of its own: briefs drawn per sheet in the lab's cluster, each built as a :class:`Question` from
the facts the tree asks for. Its widget hands the answers to the lab (``submit``), whose check says how
many are right but not which, and draws new briefs at every third miss: trying answers until the count is
full is slow and teaches nothing, yet a learner can always try again.

>>> classify(creates_resources=True, outside_krm=False)
<Pattern.COMPOSITE: 'Composite'>
>>> grade({"database": "Provisioner"}, QUESTIONS[:1]).score
1
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Pattern(StrEnum):
    PROVISIONER = "Provisioner"
    COMPOSITE = "Composite"
    ENFORCER = "Enforcer"
    GOVERNOR = "Governor"


def classify(*, creates_resources: bool, outside_krm: bool = False, on_requests: bool = False) -> Pattern:
    """Walk the decision tree. ``outside_krm`` matters only for creators, ``on_requests`` only for the rest."""
    if creates_resources:
        return Pattern.PROVISIONER if outside_krm else Pattern.COMPOSITE
    return Pattern.ENFORCER if on_requests else Pattern.GOVERNOR


def parse(value: str | Pattern) -> Pattern:
    """Accept a pattern in any letter case; say which names exist when it is none of them."""
    if isinstance(value, Pattern):
        return value
    for pattern in Pattern:
        if str(value).strip().lower() == pattern.value.lower():
            return pattern
    names = ", ".join(p.value for p in Pattern)
    raise ValueError(f"{value!r} is not a controller pattern; answer with one of: {names}")


@dataclass(frozen=True)
class Question:
    """A described need, the pattern that fits it, and the tree walk that gets there."""

    id: str
    need: str
    creates_resources: bool
    outside_krm: bool = False
    on_requests: bool = False
    why: str = ""
    example: str = ""

    @property
    def answer(self) -> Pattern:
        return classify(creates_resources=self.creates_resources, outside_krm=self.outside_krm,
                        on_requests=self.on_requests)


QUESTIONS: tuple[Question, ...] = (
    Question("database", "Teams declare a managed Postgres database from their cloud provider in the same "
             "repository as their app, and expect it to exist when they apply it.", True, outside_krm=True,
             why="It creates something, and that something lives in the cloud, not in the API server.",
             example="Config Connector, Crossplane, ACK"),
    Question("sidecar", "Every Pod created in a namespace labelled mesh=on should get a proxy container "
             "added before it is stored.", False, on_requests=True,
             why="It creates nothing; it edits create requests as they pass through admission.",
             example="Istio's sidecar injector (a mutating webhook)"),
    Question("queue-scaling", "A Deployment should run more replicas when a message queue grows and fewer "
             "when it shrinks, all day long.", False,
             why="It creates nothing and keeps adjusting an object it does not own, in steady state.",
             example="HPA, KEDA"),
    Question("tracing-stack", "One object describes a tracing installation; from it come a collector "
             "Deployment, a query Service and their ConfigMap, deleted together with it.", True,
             why="It creates KRM objects and owns them; the garbage collector removes them with the owner.",
             example="the Jaeger operator"),
    Question("ingress-hosts", "An Ingress whose host is outside the team's own DNS domain must be refused "
             "with a clear message.", False, on_requests=True,
             why="It allows or denies requests and creates nothing.",
             example="ValidatingAdmissionPolicy, Gatekeeper, Kyverno"),
    Question("dns-record", "For each DNSRecord object, a record should exist at an external DNS provider, "
             "and go away with the object.", True, outside_krm=True,
             why="The thing it creates lives outside KRM; a finalizer cleans it up.",
             example="external DNS controllers, Crossplane providers"),
    Question("sharded-db", "A database cluster object makes the operator run one StatefulSet per shard, "
             "plus a routing Deployment and Services.", True,
             why="Everything it creates is itself a KRM object, owned by the top-level one.",
             example="the Vitess operator, StatefulSet to Pods"),
    Question("right-sizing", "The CPU and memory requests of a workload's pods should follow their "
             "measured usage over the days.", False,
             why="It keeps acting on objects it did not create and can be attached or detached.",
             example="the Vertical Pod Autoscaler"),
)


@dataclass(frozen=True)
class Mark:
    question: Question
    given: Pattern | None

    @property
    def right(self) -> bool:
        return self.given == self.question.answer

    @property
    def feedback(self) -> str:
        if self.given is None:
            return "not answered yet"
        if self.right:
            return f"right: {self.question.why} ({self.question.example})"
        return "not quite: ask whether it creates anything, and where that thing lives"


@dataclass(frozen=True)
class Score:
    marks: tuple[Mark, ...]

    @property
    def score(self) -> int:
        return sum(m.right for m in self.marks)

    @property
    def total(self) -> int:
        return len(self.marks)

    @property
    def wrong(self) -> list[str]:
        """Ids of questions answered wrongly or not at all."""
        return [m.question.id for m in self.marks if not m.right]

    def __str__(self) -> str:
        return f"{self.score}/{self.total} right"


def grade(answers: Mapping[str, str | Pattern | None], questions: Sequence[Question] = QUESTIONS) -> Score:
    """Mark the answers (question id → pattern name). Unknown ids are an error, so typos do not pass."""
    ids = {q.id for q in questions}
    unknown = sorted(set(answers) - ids)
    if unknown:
        raise KeyError(f"no question with id {', '.join(unknown)}; the ids are {', '.join(sorted(ids))}")
    return Score(tuple(Mark(q, None if (answer := answers.get(q.id)) is None or answer == "" else parse(answer))
                       for q in questions))


def quiz_widget(questions: Sequence[Question] = QUESTIONS,
                submit: Callable[[dict[str, str | None]], str] | None = None) -> Any:
    """An ipywidgets quiz: one row of buttons per question and a button that grades them all.

    Without ``submit`` the button grades here and marks each answer (for practice). With it, the button
    passes the answers (question id → pattern name, None when not picked) to ``submit`` and shows only
    the text it returns: a lab's check that must not say which answers are wrong.
    """
    import ipywidgets as w

    pickers = {q.id: w.ToggleButtons(options=[p.value for p in Pattern], value=None,
                                     style={"button_width": "110px"}) for q in questions}
    result = w.HTML()

    def on_check(_: Any) -> None:
        answers = {qid: p.value for qid, p in pickers.items()}
        if submit is not None:
            result.value = f"<p>{html.escape(submit(answers))}</p>"
            return
        score = grade(answers, questions)
        rows = "".join(f"<li><b>{m.question.id}</b>: {m.feedback}</li>" for m in score.marks)
        result.value = f"<p><b>{score}</b></p><ul>{rows}</ul>"

    button = w.Button(description="Check my answers", button_style="primary")
    button.on_click(on_check)
    rows = [w.VBox([w.HTML(f"<b>{i}. </b>{q.need}"), pickers[q.id]]) for i, q in enumerate(questions, 1)]
    box = w.VBox([*rows, button, result])
    box.pickers, box.check, box.result = pickers, on_check, result  # handles for tests and instructors
    return box
