"""Plumbing for the controller-patterns lab: read fingerprints, open the case files, draw the quiz, grade.

Three parts:

- **Reading fingerprints** (:func:`children`, :func:`writers`, :func:`try_patch`, :func:`owner_chain`): small
  tools that show what the API server keeps about who did what. They know nothing about any answer.
- **The case files** (:func:`open_cases`): four Cases with made-up names in the ``casework`` namespace, and
  a pattern acting on each, drawn afresh each time the files are opened. The draw is kept in the lab's
  state folder, beside the cluster, never in it; the casework controller (``controllers/casework.py``)
  reads it to know which Case each of its loops looks after.
- **The quiz sheet** (:func:`quiz_sheet`): eight briefs, ConfigMaps with made-up names in ``casework`` that
  say what a planned controller creates and when it acts; which pattern each is drawn per sheet.

Both exercises grade through :func:`judge`: it says how many answers are right but not which, counts
the misses on an object the learner does not write, and draws afresh at the third (see
``exercises/case-files.py``).
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from krmcourse import CheckFailed, KubectlError, Lab, ManagedProcess
from krmcourse.quiz import QUESTIONS, Pattern, Question, parse
from krmcourse.quiz import quiz_widget as _quiz_widget

NAMESPACE = "demo"  # the four examples that ship with Kubernetes
CASEWORK = "casework"  # the case files, the verdicts and the quiz
GROUP_VERSION = "patterns.krmcourse.dev/v1"
FINALIZER = "patterns.krmcourse.dev/cleanup"
SERVICE_ACCOUNT = "casework-controller"
INDEX, VERDICTS = "case-files", "verdicts"
SHEET, QUIZ_ANSWERS = "quiz-sheet", "quiz-answers"
#: Graded attempts that may miss on one draw of the case files or the quiz sheet; the last of them draws afresh.
MAX_MISSES = 3
MISSES = "patterns.krmcourse.dev/misses"
LAST_GRADED = "patterns.krmcourse.dev/last-graded"
SHEET_ID = "patterns.krmcourse.dev/sheet"
#: The label on the quiz's briefs; its value is the id of the sheet that drew them.
BRIEF_LABEL = "patterns.krmcourse.dev/brief"
#: The kinds :func:`children` looks through for objects that a given object controls.
CHILD_KINDS = "configmaps,secrets,services,deployments,statefulsets,replicasets,pods,jobs"

#: The evidence each pattern's verdict must give, in words (for hints and the notebook).
EVIDENCE = {
    Pattern.COMPOSITE: "the name of an object that the Case controls",
    Pattern.PROVISIONER: "the id, in the Case's status, of what was made outside the cluster",
    Pattern.GOVERNOR: "the field manager that keeps writing the Case's spec",
    Pattern.ENFORCER: "the name of the admission policy that judges changes to the Case",
}
_FACTS = {  # where each pattern sits in the decision tree, to grade verdicts with krmcourse.quiz.grade
    Pattern.PROVISIONER: {"creates_resources": True, "outside_krm": True},
    Pattern.COMPOSITE: {"creates_resources": True},
    Pattern.ENFORCER: {"creates_resources": False, "on_requests": True},
    Pattern.GOVERNOR: {"creates_resources": False},
}
_ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"  # no 0/o, 1/l/i: names are read off a screen
_WORDS = ("ledger", "notes", "slate", "draft", "card", "memo", "folio", "tally")


# --------------------------------------------------------------------------- reading fingerprints
@dataclass
class Attempt:
    """What the API server answered to a write."""

    allowed: bool
    message: str


def controller_of(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The ownerReference with ``controller: true``, if any."""
    return next((r for r in obj["metadata"].get("ownerReferences") or [] if r.get("controller")), None)


def owner_chain(lab: Lab, kind: str, name: str, namespace: str = NAMESPACE) -> list[str]:
    """Kind/name from an object up through its controller ownerReferences, as the API server has them."""
    chain = [f"{kind}/{name}"]
    obj = lab.get(kind, name, namespace=namespace)
    while obj is not None and (ref := controller_of(obj)) is not None:
        chain.append(f"{ref['kind']}/{ref['name']}")
        obj = lab.get(ref["kind"].lower(), ref["name"], namespace=namespace)
    return chain


def children(lab: Lab, obj: dict[str, Any]) -> list[str]:
    """Kind/name of every object in ``obj``'s namespace whose controller ownerReference has ``obj``'s uid."""
    meta = obj["metadata"]
    items = lab.objects(CHILD_KINDS, meta["namespace"])
    return sorted(f"{i['kind']}/{i['metadata']['name']}" for i in items
                  if (controller_of(i) or {}).get("uid") == meta["uid"])


def _paths(fields: dict[str, Any], prefix: str = "") -> list[str]:
    """Dotted paths of the fields in a managedFields ``fieldsV1`` tree; list items fold into their list."""
    out: list[str] = []
    for key, sub in fields.items():
        if key == ".":
            continue
        if not key.startswith("f:"):  # k:{...}, v:"...", i:N: an item of the list at prefix
            if prefix and prefix not in out:
                out.append(prefix)
            continue
        path = f"{prefix}.{key[2:]}" if prefix else key[2:]
        deeper = {k: v for k, v in (sub or {}).items() if k != "."}
        for p in (_paths(deeper, path) if deeper else [path]):
            if p not in out:
                out.append(p)
    return out


def writers(obj: dict[str, Any]) -> dict[str, list[str]]:
    """Field manager → the fields it wrote last, from ``metadata.managedFields``.

    Fetch the object with ``lab.get(..., show_managed_fields=True)``: kubectl leaves them out otherwise.
    """
    entries = obj["metadata"].get("managedFields")
    if entries is None:
        raise ValueError("this object came without managedFields: fetch it with show_managed_fields=True")
    out: dict[str, list[str]] = {}
    for entry in entries:
        paths = out.setdefault(entry["manager"], [])
        paths.extend(p for p in _paths(entry.get("fieldsV1") or {}) if p not in paths)
    return out


def try_patch(lab: Lab, kind: str, name: str, patch: dict[str, Any], namespace: str = NAMESPACE) -> Attempt:
    """Send a merge patch as a server-side dry run: it goes through admission, and nothing is stored."""
    try:
        lab.kubectl("patch", kind, name, "-n", namespace, "--type=merge", "-p", json.dumps(patch),
                    "--dry-run=server")
    except KubectlError as exc:
        return Attempt(False, exc.stderr.strip())
    return Attempt(True, "")


def pods(lab: Lab, selector: str = "app=web", namespace: str = NAMESPACE) -> list[dict[str, Any]]:
    return lab.objects("pods", namespace, selector=selector)


def try_scale(lab: Lab, replicas: int, deployment: str = "web", namespace: str = NAMESPACE) -> Attempt:
    """Ask for a replica count through the scale subresource, as `kubectl scale` and the HPA do."""
    try:
        lab.kubectl("scale", f"deployment/{deployment}", "-n", namespace, f"--replicas={replicas}")
    except KubectlError as exc:
        return Attempt(False, exc.stderr.strip())
    return Attempt(True, "")


def wait_policy_in_force(lab: Lab, deployment: str = "web", namespace: str = NAMESPACE, timeout: float = 30) -> str:
    """Dry-run a scale past the limit until the API server refuses it, and return its message.

    The API server loads a new admission policy and its binding through its own watch, so for a moment
    after they are created, requests still pass. A server-side dry run goes through admission and
    changes nothing.
    """

    def refused() -> str | None:
        try:
            lab.kubectl("scale", f"deployment/{deployment}", "-n", namespace, "--replicas=6", "--dry-run=server")
        except KubectlError as exc:
            return exc.stderr.strip()
        return None

    return lab.wait_until(refused, timeout=timeout, message="the replica-limit policy never took effect")


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind), {})


def case(lab: Lab, name: str) -> dict[str, Any]:
    """The Case ``name`` in casework, with its managedFields."""
    obj = lab.get("case", name, namespace=CASEWORK, show_managed_fields=True)
    if obj is None:
        raise LookupError(f"there is no Case {name} in {CASEWORK}; the open ones are: {' '.join(open_case_names(lab))}")
    return obj


# --------------------------------------------------------------------------- the case files
@dataclass(frozen=True)
class CaseFiles:
    """The draw behind one opening of the case files, as kept in the lab's state folder."""

    record: dict[str, Any]

    @property
    def id(self) -> str:
        return str(self.record["id"])

    @property
    def names(self) -> list[str]:
        return sorted(self.record["cases"])

    def pattern(self, name: str) -> Pattern:
        return Pattern(self.record["cases"][name]["pattern"])

    def evidence(self, name: str) -> str:
        return str(self.record["cases"][name]["evidence"])

    def questions(self) -> tuple[Question, ...]:
        """One quiz question per Case, so that krmcourse.quiz.grade marks the pattern part of the verdicts."""
        return tuple(Question(n, f"Case {n}", **_FACTS[self.pattern(n)]) for n in self.names)

    def __str__(self) -> str:
        return f"Case files {self.id}, open in namespace {CASEWORK}: " + ", ".join(self.names)


def record_path(lab: Lab) -> Path:
    return lab.home / "case-files.json"


def _token(n: int) -> str:
    return "".join(secrets.choice(_ALPHABET) for _ in range(n))


def _draw() -> dict[str, Any]:
    """Names, and which pattern acts on which Case, for a new opening; every part of the evidence is random."""
    names: list[str] = []
    while len(names) < 4:
        if (name := f"case-{_token(4)}") not in names:
            names.append(name)
    patterns = list(Pattern)
    secrets.SystemRandom().shuffle(patterns)
    by = dict(zip(patterns, names, strict=True))
    rng = secrets.SystemRandom()
    sizes = {n: rng.randint(1, 5) for n in names}
    words = rng.sample(_WORDS, 3)
    record: dict[str, Any] = {
        "id": _token(6),
        "namespace": CASEWORK,
        "sizes": sizes,
        "tiers": {n: rng.choice(["bronze", "silver", "gold"]) for n in names},
        "decoys": [f"{w}-{_token(5)}" for w in words[1:]],
        "composite": {"case": by[Pattern.COMPOSITE], "manager": f"ctl-{_token(4)}", "child": f"{words[0]}-{_token(5)}"},
        "provisioner": {"case": by[Pattern.PROVISIONER], "manager": f"ctl-{_token(4)}",
                        "externalID": f"vol-{secrets.token_hex(5)}"},
        "governor": {"case": by[Pattern.GOVERNOR], "manager": f"ctl-{_token(4)}",
                     "size": rng.choice([s for s in range(1, 10) if s != sizes[by[Pattern.GOVERNOR]]])},
        "enforcer": {"case": by[Pattern.ENFORCER], "policy": f"rule-{_token(5)}"},
    }
    evidence = {Pattern.COMPOSITE: record["composite"]["child"],
                Pattern.PROVISIONER: record["provisioner"]["externalID"],
                Pattern.GOVERNOR: record["governor"]["manager"], Pattern.ENFORCER: record["enforcer"]["policy"]}
    record["cases"] = {by[p]: {"pattern": p.value, "evidence": evidence[p]} for p in Pattern}
    return record


def _read_record(lab: Lab) -> dict[str, Any] | None:
    try:
        record = json.loads(record_path(lab).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and "cases" in record else None


def _write_record(lab: Lab, record: dict[str, Any]) -> None:
    path = record_path(lab)
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_suffix(".new")
    scratch.write_text(json.dumps(record, indent=1))
    scratch.replace(path)  # the controller reads the old record or the new one, never half of one


def case_files(lab: Lab) -> CaseFiles | None:
    """The case files open now: the record and the index in the cluster agree; None when none are open."""
    record = _read_record(lab)
    index = lab.get("configmap", INDEX, namespace=CASEWORK)
    if record is None or index is None or (index.get("data") or {}).get("id") != record["id"]:
        return None
    return CaseFiles(record)


def open_case_names(lab: Lab) -> list[str]:
    files = case_files(lab)
    return files.names if files else []


def controller_args(record: Path, store: Path) -> list[str]:
    """The casework controller's arguments: the record that says which Case each loop looks after, and the
    provisioner's store outside the cluster."""
    return ["--namespace", CASEWORK, "--record", str(record), "--store", str(store)]


def start_controller(lab: Lab) -> ManagedProcess:
    """Run the casework controller as its ServiceAccount (or find it running); returns once it works."""
    return lab.start("casework", *controller_args(record_path(lab), lab.home / "casework-outside.json"))


#: The record the fault harness gives the casework loops: the Cases of faults/probe.yaml. No composite Case: the
#: garbage collector removes the ConfigMap of a deleted Case a moment after it, so the ConfigMap of the harness's
#: previous run could pass for the new one's.
FAULT_RECORD = {
    "provisioner": {"case": "fault-probe-provisioner", "manager": "fault-probe-provisioner",
                    "externalID": "vol-fault-probe"},
    "governor": {"case": "fault-probe-governor", "manager": "fault-probe-governor", "size": 7},
}


def prepare_faults(lab: Lab) -> list[str]:
    """For the fault harness (``converges.prepare`` in lab.yaml): write FAULT_RECORD beside the cluster (apart
    from the case files' record), and return the arguments that point the casework controller at it."""
    folder = lab.home / "faults"
    folder.mkdir(parents=True, exist_ok=True)
    record = folder / "casework-record.json"
    record.write_text(json.dumps(FAULT_RECORD, indent=1))
    return controller_args(record, folder / "casework-outside.json")


def open_cases(lab: Lab, fresh: bool = False) -> CaseFiles:
    """Open the case files: the ones open now, or (``fresh=True``, or none open) a new draw.

    A new draw closes the old files first (their Cases, policy, verdicts and miss count go), then
    creates four Cases as a team would (``kubectl create``), two ConfigMaps nobody controls, and the
    admission policy; it returns once every controller has left its mark and the policy is in force.
    """
    start_controller(lab)
    current = case_files(lab)
    if current is not None and not fresh:
        return current
    old = _read_record(lab)
    record = _draw()
    _write_record(lab, record)  # the controller's loops follow on their next pass
    lab.kubectl("delete", "configmap", INDEX, VERDICTS, "-n", CASEWORK, "--ignore-not-found")
    lab.kubectl("delete", "cases", "--all", "-n", CASEWORK, "--wait=false")
    if old is not None:
        lab.kubectl("delete", "configmap", *old.get("decoys", []), "-n", CASEWORK, "--ignore-not-found")
        policy = old["enforcer"]["policy"]
        lab.kubectl("delete", f"validatingadmissionpolicybinding/{policy}", f"validatingadmissionpolicy/{policy}",
                    "--ignore-not-found")
    lab.wait_until(lambda: not lab.objects("cases", CASEWORK),
                   timeout=60, message="the old Cases were never released (is the casework controller running?)")
    _create_scene(lab, record)
    lab.wait_until(lambda: not scene_problems(lab, CaseFiles(record)), timeout=90,
                   message="the casework controller did not act on the new Cases")
    enforced = record["enforcer"]["case"]
    lab.wait_until(lambda: not try_patch(lab, "case", enforced, {"spec": {"size": 9}}, CASEWORK).allowed,
                   timeout=30, message="the case files' admission policy never took effect")
    lab.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": INDEX, "namespace": CASEWORK},
               "data": {"id": record["id"], "cases": "\n".join(sorted(record["cases"]))}})
    return CaseFiles(record)


def _create_scene(lab: Lab, record: dict[str, Any]) -> None:
    names = list(record["cases"])
    secrets.SystemRandom().shuffle(names)  # creation order says nothing either
    cases = [{"apiVersion": GROUP_VERSION, "kind": "Case", "metadata": {"name": n, "namespace": CASEWORK},
              "spec": {"size": record["sizes"][n], "tier": record["tiers"][n]}} for n in names]
    rng = secrets.SystemRandom()  # the ConfigMaps nobody controls look like the one a Case controls
    decoys = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": d, "namespace": CASEWORK},
               "data": {"size": str(rng.randint(1, 5)), "tier": rng.choice(["bronze", "silver", "gold"])}}
              for d in record["decoys"]]
    lab.kubectl("create", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": cases + decoys}))
    policy, guarded = record["enforcer"]["policy"], record["enforcer"]["case"]
    lab.apply([
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
         "metadata": {"name": policy},
         "spec": {"failurePolicy": "Fail",
                  "matchConstraints": {"resourceRules": [{
                      "apiGroups": ["patterns.krmcourse.dev"], "apiVersions": ["*"], "operations": ["UPDATE"],
                      "resources": ["cases"], "resourceNames": [guarded]}]},
                  "validations": [{"expression": "object.spec == oldObject.spec",
                                   "message": "this Case's spec is fixed once it is created"}]}},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
         "metadata": {"name": policy},
         "spec": {"policyName": policy, "validationActions": ["Deny"],
                  "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": CASEWORK}}}}},
    ])


def scene_problems(lab: Lab, files: CaseFiles) -> list[str]:
    """What the cluster no longer shows of the case files' evidence (empty when all of it is there)."""
    record = files.record
    cases = {c["metadata"]["name"]: c for c in lab.objects("cases", CASEWORK, show_managed_fields=True)
             if not c["metadata"].get("deletionTimestamp")}
    problems = [f"Case {n} is gone" for n in files.names if n not in cases]
    part = record["composite"]
    child = lab.get("configmap", part["child"], namespace=CASEWORK)
    if part["case"] in cases and (child is None or (controller_of(child) or {}).get("uid")
                                  != cases[part["case"]]["metadata"]["uid"]):
        problems.append(f"Case {part['case']} controls nothing yet")
    part = record["provisioner"]
    if part["case"] in cases:
        found = cases[part["case"]]
        if FINALIZER not in (found["metadata"].get("finalizers") or []) \
                or (found.get("status") or {}).get("externalID") != part["externalID"]:
            problems.append(f"Case {part['case']} has no record outside the cluster yet")
    part = record["governor"]
    if part["case"] in cases and "spec.size" not in writers(cases[part["case"]]).get(part["manager"], []):
        problems.append(f"Case {part['case']} has not been governed yet")
    part = record["enforcer"]
    if lab.get("validatingadmissionpolicybinding", part["policy"]) is None:
        problems.append(f"the admission policy that judges Case {part['case']} is gone")
    return problems


def give_verdicts(lab: Lab, verdicts: Mapping[str, str | tuple[str, str]]) -> None:
    """Write the ConfigMap ``verdicts``: Case name → ``"<Pattern> <evidence>"`` (or a (pattern, evidence) pair)."""
    data = {name: " ".join(v) if isinstance(v, tuple) else str(v) for name, v in verdicts.items()}
    _replace_configmap(lab, VERDICTS, data)


def read_verdicts(lab: Lab, files: CaseFiles) -> dict[str, tuple[Pattern, str]]:
    """The learner's verdicts, one per open Case; CheckFailed with a hint when they cannot be graded yet."""
    cm = lab.get("configmap", VERDICTS, namespace=CASEWORK)
    if cm is None:
        raise CheckFailed(f"There is no ConfigMap {VERDICTS} in {CASEWORK} yet: the check grades the verdicts "
                          "written there, one key per Case.")
    data = cm.get("data") or {}
    unknown = sorted(set(data) - set(files.names))
    if unknown:
        raise CheckFailed(f"The verdicts name {', '.join(unknown)}, which {'is' if len(unknown) == 1 else 'are'} "
                          f"not an open Case; the open ones are {', '.join(files.names)}.")
    missing = [n for n in files.names if not (data.get(n) or "").strip()]
    if missing:
        raise CheckFailed(f"No verdict yet for {', '.join(missing)}: the check grades only a full set of verdicts, "
                          "one per Case.")
    verdicts: dict[str, tuple[Pattern, str]] = {}
    for name in files.names:
        word, _, evidence = re.sub(r"^\s*(\w+)\s*[:,]?\s*", r"\1 ", data[name]).partition(" ")
        try:
            pattern = parse(word)
        except ValueError as exc:
            raise CheckFailed(f"The verdict for {name} starts with {exc}.") from None
        if not evidence.strip():
            raise CheckFailed(f"The verdict for {name} names a pattern but no evidence. After the pattern, give "
                              f"what the cluster shows for it: for a {pattern.value}, {EVIDENCE[pattern]}.")
        verdicts[name] = (pattern, evidence.strip())
    return verdicts


def same_evidence(pattern: Pattern, given: str, expected: str) -> bool:
    """Whether ``given`` names ``expected``; a ``kind/`` prefix is fine (for a Composite, only ConfigMap's)."""
    text = given.strip().strip("'\"`").lower()
    kind, _, name = text.rpartition("/")
    if kind and pattern is Pattern.COMPOSITE and kind not in ("configmap", "configmaps", "cm"):
        return False
    return name == expected.lower()


# --------------------------------------------------------------------------- grading without an oracle
def digest(answers: Mapping[str, str]) -> str:
    """A short fingerprint of a set of answers, so that re-checking the same answers costs nothing."""
    text = json.dumps({k: " ".join(str(v).lower().split()) for k, v in answers.items()}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def misses(lab: Lab, ledger: str) -> int:
    """How many graded attempts missed on the case files' index or quiz sheet ``ledger``."""
    obj = lab.get("configmap", ledger, namespace=CASEWORK)
    return int(((obj or {}).get("metadata", {}).get("annotations") or {}).get(MISSES, "0"))


def judge(lab: Lab, ledger: str, answers: Mapping[str, str], right: int, total: int, *, what: str,
          redraw: Callable[[], object], redrawn: str, advice: str = "") -> None:
    """Pass when all ``total`` answers are right; otherwise say how many are, never which, and count the miss.

    The misses are counted in annotations of ``ledger`` (the index of the case files, or the quiz sheet),
    not on the answers, so writing the answers afresh does not reset them. The same answers checked again
    are not a new attempt. The :data:`MAX_MISSES`-th miss calls ``redraw``, which replaces the ledger (and
    its count) with a new draw, and the hint says so (``redrawn``): the learner can always try again, never
    meets a check that refuses to grade, and what the counts told about the old draw does not fit the new one.
    """
    if right == total:
        return
    obj = lab.get("configmap", ledger, namespace=CASEWORK)
    annotations = ((obj or {}).get("metadata") or {}).get("annotations") or {}
    missed = int(annotations.get(MISSES, "0"))
    fingerprint = digest(answers)
    count = " ".join(filter(None, [f"{right} of {total} right; the check does not say which.", advice]))
    if fingerprint != annotations.get(LAST_GRADED):
        missed += 1
        if missed >= MAX_MISSES:
            redraw()
            raise CheckFailed(f"{count} That was miss {missed} on {what}, so the check drew again: {redrawn}")
        lab.kubectl("annotate", "configmap", ledger, "-n", CASEWORK, "--overwrite", f"{MISSES}={missed}",
                    f"{LAST_GRADED}={fingerprint}")
    left = MAX_MISSES - missed
    raise CheckFailed(f"{count} {left} more miss{'es' if left != 1 else ''} on {what}, and the check draws "
                      "afresh.")


# --------------------------------------------------------------------------- the quiz sheet
#: What a brief says a planned controller makes and when it acts, per pattern: the facts the tree asks for.
#: Each brief draws one line of each; the sheet names only the briefs, so the facts are in the cluster alone.
_BRIEF_FACTS: dict[Pattern, dict[str, tuple[str, ...]]] = {
    Pattern.PROVISIONER: {
        "creates": ("a bucket in the team's object store account", "a record at the external DNS provider",
                    "a managed Postgres instance in the cloud account", "a queue at the hosted messaging service"),
        "acts": ("whenever its object changes, and again every ten minutes to repair drift",
                 "on every change of its object, and before the object goes, to delete what it made"),
    },
    Pattern.COMPOSITE: {
        "creates": ("a Deployment and a Service, each with a controller ownerReference to the object",
                    "one StatefulSet per shard plus a ConfigMap, all owned by the object",
                    "a Job per backup, owned by the object", "a Secret and a ServiceAccount owned by the object"),
        "acts": ("whenever its object or anything it owns changes",
                 "on every change of its object, and when an owned child is edited by hand"),
    },
    Pattern.ENFORCER: {
        "creates": ("nothing", "nothing; it only answers the API server"),
        "acts": ("when the API server asks it about a create or update request, before anything is stored",
                 "inside admission: it allows, denies or amends each request to write Pods"),
    },
    Pattern.GOVERNOR: {
        "creates": ("nothing", "nothing; it changes objects that others created"),
        "acts": ("all the time: every thirty seconds it rewrites spec.replicas of Deployments it is aimed at",
                 "continuously, on objects in steady state: it keeps adjusting the CPU and memory settings of "
                 "running workloads"),
    },
}
#: The old page's sheet: the course's eight needs, whose answers the decision tree gave straight from the text.
#: No draw answers in this order, so copying them from the page never passes.
PAGE_ANSWERS = tuple(q.answer for q in QUESTIONS)


@dataclass(frozen=True)
class Sheet:
    """The quiz in this sheet's order: (number, question) pairs, numbered from 1; each question one brief."""

    items: tuple[tuple[str, Question], ...]

    @property
    def questions(self) -> tuple[Question, ...]:
        return tuple(q for _, q in self.items)

    def __str__(self) -> str:
        return "\n".join(f"{n}. {q.need}" for n, q in self.items)


def sheet_path(lab: Lab) -> Path:
    return lab.home / "quiz-sheet.json"


def _brief_question(name: str, pattern: Pattern, creates: str, acts: str) -> Question:
    return Question(name, f"The controller planned in ConfigMap {name} (namespace {CASEWORK}).", **_FACTS[pattern],
                    why=f"it creates {creates}, and acts {acts}.", example=name)


def read_sheet(lab: Lab) -> Sheet | None:
    """The quiz sheet drawn in the cluster, or None when there is none (or it no longer matches its draw)."""
    cm = lab.get("configmap", SHEET, namespace=CASEWORK)
    try:
        record = json.loads(sheet_path(lab).read_text())
    except (OSError, ValueError):
        return None
    data = (cm or {}).get("data") or {}
    sheet_id = (((cm or {}).get("metadata") or {}).get("annotations") or {}).get(SHEET_ID)
    briefs = record.get("briefs") if isinstance(record, dict) else None
    if not briefs or sheet_id != record.get("id") or data != {n: b["name"] for n, b in briefs.items()}:
        return None
    return Sheet(tuple((n, _brief_question(b["name"], Pattern(b["pattern"]), b["creates"], b["acts"]))
                       for n, b in sorted(briefs.items(), key=lambda item: int(item[0]))))


def _draw_briefs() -> dict[str, dict[str, str]]:
    rng = secrets.SystemRandom()
    patterns = list(Pattern) * 2
    while True:
        rng.shuffle(patterns)
        if tuple(patterns) != PAGE_ANSWERS:
            break
    names: list[str] = []
    while len(names) < len(patterns):
        if (name := f"brief-{_token(5)}") not in names:
            names.append(name)
    return {str(i): {"name": name, "pattern": p.value, "creates": rng.choice(_BRIEF_FACTS[p]["creates"]),
                     "acts": rng.choice(_BRIEF_FACTS[p]["acts"])}
            for i, (name, p) in enumerate(zip(names, patterns, strict=True), 1)}


def quiz_sheet(lab: Lab, fresh: bool = False) -> Sheet:
    """The quiz sheet: the one drawn already, or (``fresh=True``, or none yet) eight new briefs.

    Each brief is a ConfigMap in ``casework`` with a made-up name, saying what a planned controller creates
    and when it acts; which pattern each is drawn per sheet (two of each), and kept in the lab's state folder.
    """
    sheet = read_sheet(lab)
    if sheet is not None and not fresh:
        return sheet
    lab.kubectl("delete", "configmap", SHEET, QUIZ_ANSWERS, "-n", CASEWORK, "--ignore-not-found")
    lab.kubectl("delete", "configmap", "-n", CASEWORK, "-l", BRIEF_LABEL, "--ignore-not-found")
    record = {"id": _token(6), "briefs": _draw_briefs()}
    path = sheet_path(lab)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1))
    for brief in record["briefs"].values():
        _replace_configmap(lab, brief["name"], {"creates": brief["creates"], "acts": brief["acts"]},
                           labels={BRIEF_LABEL: record["id"]})
    _replace_configmap(lab, SHEET, {n: b["name"] for n, b in record["briefs"].items()},
                       annotations={SHEET_ID: record["id"]})
    sheet = read_sheet(lab)
    assert sheet is not None
    return sheet


def answer_quiz(lab: Lab, answers: Mapping[str | int, str]) -> None:
    """Write the ConfigMap ``quiz-answers``: the sheet's question number → a pattern name."""
    _replace_configmap(lab, QUIZ_ANSWERS, {str(n): str(p) for n, p in answers.items()})


def quiz_widget(lab: Lab) -> Any:
    """The sheet as buttons; "Check my answers" writes quiz-answers and runs the exercise's check."""
    sheet = quiz_sheet(lab)

    def submit(answers: Mapping[str, str | None]) -> str:
        # A miss may have drawn new briefs since the buttons were made: then these buttons answer nothing.
        number = {q.id: n for n, q in quiz_sheet(lab).items}
        if set(answers) != set(number):
            return ("Not yet: these buttons were made for briefs that have been drawn again. Run this cell "
                    "again for the new sheet (print(pat.quiz_sheet(lab)) lists it), and read the new briefs.")
        answer_quiz(lab, {number[qid]: p or "" for qid, p in answers.items()})
        try:
            lab.check("pattern-quiz")
        except CheckFailed as failed:
            return f"Not yet: {failed.message}"
        return "All right. pat.quiz_review(lab) explains each answer."

    return _quiz_widget(sheet.questions, submit=submit)


def quiz_review(lab: Lab) -> str:
    """Why each answer of the sheet is right, once the quiz is solved (not before: that would be the key)."""
    if not lab.solved("pattern-quiz"):
        raise CheckFailed("The review opens once the quiz check passes.")
    sheet = read_sheet(lab)
    assert sheet is not None
    return "\n".join(f"{n}. {q.id}: {q.answer.value}, since {q.why}" for n, q in sheet.items)


def _replace_configmap(lab: Lab, name: str, data: Mapping[str, str], *, labels: Mapping[str, str] | None = None,
                       annotations: Mapping[str, str] | None = None) -> None:
    meta: dict[str, Any] = {"name": name, "namespace": CASEWORK}
    if labels:
        meta["labels"] = dict(labels)
    if annotations:
        meta["annotations"] = dict(annotations)
    lab.kubectl("delete", "configmap", name, "-n", CASEWORK, "--ignore-not-found")
    lab.kubectl("create", "-f", "-", input=json.dumps(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": dict(data)}))

