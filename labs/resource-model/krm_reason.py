"""Two questions to reason about, each asked over a fresh draw of cases (K1, K10).

``model-framework-pattern``: is each thing a model, a framework or a pattern? ``krm-or-grpc``: is each
job better declared as a KRM resource, or called over gRPC? None of the cases is in the notebook's
tables: the learner applies what the tables teach to something new.

``open_questions`` draws a few cases and keeps the draw in the lab's state folder; ``answer`` writes the
learner's answers into a ConfigMap of the same name in ``model``, with the draw's id. The check grades
a full set of answers. When any is wrong it explains each miss and opens a new draw of cases not asked
before, so answers cannot be found by trying them one by one, and the learner is never stuck: there is
always a new set to reason about. What the last graded set got wrong is kept with the draw, so the
explanation is there for whoever checks next.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import Any

from krmcourse import CheckFailed, Lab

NAMESPACE = "model"


@dataclass(frozen=True)
class Case:
    text: str
    answer: str
    why: str


QUESTIONS: dict[str, dict[str, Any]] = {
    "model-framework-pattern": {
        "choices": ("model", "framework", "pattern"),
        "size": 4,
        "cases": {
            "graphql": Case("GraphQL: one endpoint, a typed schema, and queries in which the client names the "
                            "fields it wants back; servers exist in many languages.", "model",
                            "it fixes what requests, answers and errors look like, for any API, whatever it is "
                            "written in: a model, as REST and gRPC are"),
            "json-rpc": Case("JSON-RPC: a call is a JSON object with a method name, its parameters and an id, "
                             "and the answer carries a result or an error.", "model",
                             "it says what every call and answer look like, and nothing about how to write a "
                             "server: a model"),
            "soap": Case("SOAP: every request and response is an XML envelope with a header and a body, and "
                         "faults have a fixed shape.", "model",
                         "it fixes the shape of messages and errors for every API that uses it: a model"),
            "fastapi": Case("FastAPI: a Python library in which you write functions, and it serves them as "
                            "HTTP endpoints with JSON bodies and generated docs.", "framework",
                            "it is code you build a REST API with, to save work; the API would follow the "
                            "model without it: a framework"),
            "operator-sdk": Case("Operator SDK: a tool that generates a project for a Kubernetes controller, "
                                 "and builds on controller-runtime.", "framework",
                                 "it helps you build controllers on the model; you could write one without "
                                 "it: a framework"),
            "metacontroller": Case("Metacontroller: you install it in a cluster and write only a webhook, in "
                                   "any language, that says what children a parent should have; it does the "
                                   "watching and writing.", "framework",
                                   "it is machinery that implements controllers for you on top of the model: a "
                                   "framework"),
            "spring-boot": Case("Spring Boot: a Java library that wires up a web server, JSON mapping and "
                                "configuration so that you only write the handlers.", "framework",
                                "it is a library for building services; nothing in it defines what an API "
                                "looks like: a framework"),
            "circuit-breaker": Case("Circuit breaker: after several failed calls to a service, stop calling it "
                                    "for a while and fail fast, then try one call again.", "pattern",
                                    "nobody ships or enforces it; it is a way of using calls that kept turning "
                                    "out well, and has a name so that people can reuse it: a pattern"),
            "x-and-xclass": Case("X and XClass: a cluster-wide object (such as StorageClass) holds a site's "
                                 "defaults, and each object names the class it wants.", "pattern",
                                 "no framework gives you this; it is a recurring way of using KRM objects, "
                                 "found in practice: a pattern"),
            "backoff": Case("Exponential backoff: after a failure, wait, and double the wait after each "
                            "further failure, up to a limit.", "pattern",
                            "it is a habit of good clients, whatever model or library they use: a pattern"),
            "sidecar": Case("Sidecar: a helper container runs beside the main one in the same Pod, to ship "
                            "its logs or proxy its traffic.", "pattern",
                            "Kubernetes does not require it and no single library is it; it is a shape of "
                            "deployment that kept working: a pattern"),
            "governor": Case("Governor: a controller keeps adjusting one field of objects that it neither "
                             "created nor owns, as the HorizontalPodAutoscaler does with replicas.", "pattern",
                             "it is a way of using the model's objects, named after it emerged in practice: "
                             "a pattern"),
        },
    },
    "krm-or-grpc": {
        "choices": ("KRM", "gRPC"),
        "size": 4,
        "cases": {
            "sensor-stream": Case("A thousand sensors each send a temperature reading every second to one "
                                  "collector.", "gRPC",
                                  "thousands of small messages a second is high-volume, chatty traffic; every KRM "
                                  "write goes through etcd, and nobody needs a reading kept as desired state"),
            "team-database": Case("A team wants a Postgres database with three replicas and nightly backups, "
                                  "kept that way even if someone deletes a replica by hand.", "KRM",
                                  "it is long-lived intent that a controller should keep reconciling towards, "
                                  "with a status to read: a declared resource"),
            "prediction": Case("A web shop asks a model server for one product recommendation on every page "
                               "view, and needs the answer within 20 ms.", "gRPC",
                               "it is an imperative call with a result, on the hot path, many times a second: "
                               "nothing is declared or kept"),
            "dns-record": Case("A DNS record must keep pointing at the current load balancer, whatever changes "
                               "the load balancer's address.", "KRM",
                               "the record is desired state to hold over time; a controller reconciles it "
                               "whenever the world drifts"),
            "game-positions": Case("A game server sends each player's position to 50 clients, 30 times a "
                                   "second.", "gRPC",
                                   "a fast stream of short-lived data: streaming RPC fits, while a store of "
                                   "desired state would only slow it down"),
            "certificate": Case("Every team should get a TLS certificate for its domain that is renewed "
                                "before it expires, and anyone may see whether it is ready.", "KRM",
                                "it is intent (this domain should have a valid certificate), reconciled over "
                                "months, with status everyone can read with kubectl"),
            "file-transfer": Case("One service hands another a 2 GB video file to transcode.", "gRPC",
                                  "bulk data in a stream between two services; an object in etcd is limited to "
                                  "about a megabyte and is the wrong place for it"),
            "nightly-backup": Case("Operators want a backup to run every night, and to see in one place whether "
                                   "last night's succeeded.", "KRM",
                                   "a schedule is declared once and kept; the outcome is a status anyone can read: "
                                   "resources, like CronJob and Job"),
            "quota-check": Case("Before accepting an upload, a service asks the billing service whether the "
                                "customer has quota left.", "gRPC",
                                "a question with an immediate answer, asked per request: an RPC, not state to "
                                "declare"),
            "bucket-lifecycle": Case("A storage bucket should exist for each project, with its objects deleted "
                                     "after 30 days, and it should be recreated if someone removes it.", "KRM",
                                     "it describes what should exist and keep existing: a provisioner reconciles "
                                     "the declaration against the cloud"),
        },
    },
}


def _path(lab: Lab, question: str) -> Any:
    return lab.home / f"{question}.json"


def _record(lab: Lab, question: str) -> dict[str, Any] | None:
    path = _path(lab, question)
    return json.loads(path.read_text()) if path.is_file() else None


def _keep(lab: Lab, question: str, record: dict[str, Any]) -> None:
    path = _path(lab, question)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))


def _draw(question: str, asked: list[str]) -> list[str]:
    """A few cases not asked before (all of them again once every case was asked), with at least two answers."""
    spec = QUESTIONS[question]
    cases: dict[str, Case] = spec["cases"]
    fresh = [key for key in cases if key not in asked]
    pool = fresh if len(fresh) >= spec["size"] else list(cases)
    rng = secrets.SystemRandom()
    while True:
        drawn = rng.sample(pool, spec["size"])
        if len({cases[key].answer for key in drawn}) > 1:
            return drawn


@dataclass(frozen=True)
class Draw:
    question: str
    id: str
    keys: list[str]

    def __str__(self) -> str:
        spec = QUESTIONS[self.question]
        lines = [f"{self.question} (set {self.id}); answer each with one of: {', '.join(spec['choices'])}"]
        lines += [f"  {key}: {spec['cases'][key].text}" for key in self.keys]
        return "\n".join(lines)


def current(lab: Lab, question: str) -> Draw | None:
    record = _record(lab, question)
    return Draw(question, record["id"], record["keys"]) if record else None


def open_questions(lab: Lab, question: str, fresh: bool = False) -> Draw:
    """The open set of cases for ``question``, drawn now if none is open (or if ``fresh``)."""
    record = _record(lab, question)
    if record is None or fresh:
        asked = (record or {}).get("asked", [])
        keys = _draw(question, asked)
        record = {"id": secrets.token_hex(3), "keys": keys, "asked": asked + keys,
                  "missed": (record or {}).get("missed")}
        _keep(lab, question, record)
    return Draw(question, record["id"], record["keys"])


def answer(lab: Lab, question: str, answers: dict[str, str]) -> None:
    """Write ``answers`` (case -> choice) for the open set into the ConfigMap ``<question>`` in model."""
    draw = current(lab, question) or open_questions(lab, question)
    lab.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": question, "namespace": NAMESPACE},
               "data": {"set": draw.id, **{key: str(value) for key, value in answers.items()}}})


def _explain(missed: dict[str, Any]) -> str:
    return (f"Set {missed['set']}: {missed['right']} of {missed['of']} right. "
            + " ".join(missed["notes"]))


def grade(lab: Lab, question: str) -> None:
    """The check of either question: pass when the open set is answered and every answer is right."""
    spec = QUESTIONS[question]
    record = _record(lab, question)
    if record is None:
        raise CheckFailed(f"No cases are open yet: run the notebook's cell that calls "
                          f"krm_reason.open_questions(lab, {question!r}).")
    draw = Draw(question, record["id"], record["keys"])
    given = (lab.get("configmap", question, NAMESPACE) or {}).get("data")
    if not given:
        raise CheckFailed(f"There are no answers yet: the ConfigMap {question} in {NAMESPACE} does not exist. "
                          f"Write them with krm_reason.answer(lab, {question!r}, {{...}}).\n{draw}")
    missed = record.get("missed")
    if given.get("set") != draw.id:
        before = _explain(missed) + "\n" if missed and missed["set"] == given.get("set") else ""
        raise CheckFailed(f"{before}These answers are for set {given.get('set')}, and the open set is {draw.id}: "
                          f"reason about its cases and answer them.\n{draw}")
    choices = {choice.lower(): choice for choice in spec["choices"]}
    unanswered = [key for key in draw.keys if str(given.get(key, "")).strip().lower() not in choices]
    if unanswered:
        raise CheckFailed(f"Give each case one of {', '.join(spec['choices'])}; not answered that way yet: "
                          f"{', '.join(unanswered)}. Nothing was graded.\n{draw}")
    cases: dict[str, Case] = spec["cases"]
    wrong = [key for key in draw.keys if choices[given[key].strip().lower()] != cases[key].answer]
    if not wrong:
        return
    notes = [f"{key}: you said {choices[given[key].strip().lower()]}, but {cases[key].why}." for key in wrong]
    missed = {"set": draw.id, "right": len(draw.keys) - len(wrong), "of": len(draw.keys), "notes": notes}
    record["missed"] = missed
    _keep(lab, question, record)
    new = open_questions(lab, question, fresh=True)
    raise CheckFailed(f"{_explain(missed)}\nA new set of cases is open; reason about each one, then answer "
                      f"it.\n{new}")


def right_answers(lab: Lab, question: str) -> dict[str, str]:
    """The right answers to the open set: what the reference solution writes."""
    draw = open_questions(lab, question)
    return {key: QUESTIONS[question]["cases"][key].answer for key in draw.keys}


# ----------------------------------------------------------------------------- what a hurried learner tries
def answer_all(lab: Lab, question: str, choice: str) -> None:
    """The same choice for every case of the open set."""
    answer(lab, question, dict.fromkeys(open_questions(lab, question).keys, choice))


def resend_explained(lab: Lab, question: str) -> None:
    """After a miss, the right answers to the set that was explained, sent again as they were."""
    given = (lab.get("configmap", question, NAMESPACE) or {}).get("data") or {}
    cases = QUESTIONS[question]["cases"]
    lab.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": question, "namespace": NAMESPACE},
               "data": {**given, **{key: cases[key].answer for key in given if key in cases}}})
