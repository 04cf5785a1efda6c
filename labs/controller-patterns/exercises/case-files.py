"""Exercise: name the pattern that acts on each of four Cases, and show the evidence the cluster keeps.

The case files (``patterns_support.open_cases``) are four Cases in ``casework`` with made-up names. On each
acts one controller of a different pattern, drawn at random when the files are opened: a composite loop
that makes a ConfigMap it controls, a provisioner loop that makes a record outside the cluster, a governor
loop that keeps rewriting the Case's spec, or an admission policy that refuses changes to it. Nothing on the
page says which is which: the learner reads ownerReferences, finalizers and status, managedFields and
admission answers. The verdicts go into the ConfigMap ``casework/verdicts``, one key per Case, each value
``<Pattern> <evidence>``:

- Composite: the name of the object the Case controls (ConfigMap, found by its controller ownerReference);
- Provisioner: the id in the Case's ``status.externalID``;
- Governor: the field manager that writes the Case's ``spec`` (not the one that created it);
- Enforcer: the name of the ValidatingAdmissionPolicy that refuses changes to it.

Why the check cannot be passed by trying answers:

1. Each verdict needs its evidence, and every piece of evidence is random per opening (names, an id, a
   field manager): it cannot be guessed, only read from the cluster. A right pattern with the wrong
   evidence is a wrong verdict, and the evidence also tells the patterns apart (a field manager is no id).
2. The check says how many verdicts are right, never which, and grades only a full set: changing one
   verdict at a time to see which one moved the count costs attempts.
3. It counts graded attempts that miss (the same verdicts checked again are not a new attempt) on the
   index ConfigMap ``casework/case-files``, not on the verdicts, so writing the verdicts afresh does not
   reset the count. The third miss opens new case files, and the hint says so: new names, a new draw, new
   evidence, so nothing learned by guessing carries over, and the learner can always try again.

Verdicts that cannot be graded (a Case missing, an unknown pattern, no evidence) get a precise hint and
cost nothing. The draw itself is kept in the lab's state folder, not in the cluster.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable

from krmcourse import CheckFailed, Lab
from krmcourse.quiz import Pattern, grade

START_AGAIN = "Open new case files (pat.open_cases(lab, fresh=True)): new Cases, a new draw, new evidence."
REDRAWN = ("new case files, with new Cases, a new draw and new evidence (print(pat.open_cases(lab)) lists them). "
           "Read the cluster again for each of them.")


def check(lab: Lab) -> None:
    sup = lab.support("patterns_support")
    files = sup.case_files(lab)
    if files is None:
        raise CheckFailed(f"No case files are open in the {sup.CASEWORK} namespace: the notebook's cell that "
                          "opens them has not run since the lab started, or they were closed.")
    verdicts = sup.read_verdicts(lab, files)
    problems = sup.scene_problems(lab, files)
    for _ in range(10):  # a loop may be putting back what was changed a moment ago
        if not problems:
            break
        time.sleep(1)
        problems = sup.scene_problems(lab, files)
    if problems:
        raise CheckFailed(f"The cluster no longer shows all of the case files' evidence ({'; '.join(problems)}). "
                          + START_AGAIN)
    score = grade({name: pattern for name, (pattern, _) in verdicts.items()}, files.questions())
    right = sum(m.right and sup.same_evidence(m.question.answer, verdicts[m.question.id][1],
                                             files.evidence(m.question.id)) for m in score.marks)
    advice = ("A verdict is right when its pattern is, and its evidence is what the cluster shows for that "
              "pattern: " + "; ".join(f"{p.value}, {sup.EVIDENCE[p]}" for p in Pattern) + ".")
    sup.judge(lab, sup.INDEX, {n: f"{p.value} {e}" for n, (p, e) in verdicts.items()}, right, len(files.names),
              what="these case files", redraw=lambda: sup.open_cases(lab, fresh=True), redrawn=REDRAWN,
              advice=advice)


def solve(lab: Lab) -> None:
    sup = lab.support("patterns_support")
    files = sup.open_cases(lab)
    verdicts = {}
    for name in files.names:
        case = sup.case(lab, name)  # with its managedFields
        owned = sup.children(lab, case)  # objects whose controller ownerReference carries this Case's uid
        external = (case.get("status") or {}).get("externalID")
        refused = sup.try_patch(lab, "case", name, {"spec": {"size": 9}}, sup.CASEWORK)  # a dry run
        spec_writers = [manager for manager, fields in sup.writers(case).items()
                        if any(f.startswith("spec.") for f in fields) and manager != "kubectl-create"]
        if owned:
            verdicts[name] = f"Composite {owned[0]}"
        elif external and case["metadata"].get("finalizers"):
            verdicts[name] = f"Provisioner {external}"
        elif not refused.allowed:  # "... ValidatingAdmissionPolicy 'rule-...' with binding ... denied request"
            verdicts[name] = "Enforcer " + refused.message.split("ValidatingAdmissionPolicy '")[1].split("'")[0]
        else:  # someone other than its creator keeps writing its spec
            verdicts[name] = f"Governor {spec_writers[0]}"
    sup.give_verdicts(lab, verdicts)


# --------------------------------------------------------------------------- what a hurried learner tries
def _right_patterns_wrong_evidence(lab: Lab) -> None:
    """The patterns are right, but each evidence is something that lies nearby, not the fingerprint."""
    sup = lab.support("patterns_support")
    files = sup.open_cases(lab)
    nearby = {Pattern.COMPOSITE: "kube-root-ca.crt",  # a ConfigMap in the namespace, which no Case controls
              Pattern.PROVISIONER: sup.FINALIZER,  # the finalizer, not the id of what was made outside
              Pattern.GOVERNOR: "kubectl-create",  # who created the Case, not who keeps changing it
              Pattern.ENFORCER: "replica-limit"}  # the demo namespace's policy
    sup.give_verdicts(lab, {n: (files.pattern(n).value, nearby[files.pattern(n)]) for n in files.names})


def _every_order_until_it_passes(lab: Lab) -> None:
    """Found each Case's evidence, then tried every order of the four pattern names until the check passed.

    The right order comes last here (the loop's worst case); the third miss opens new case files, so the
    orders tried after it, the right one too, name Cases that are gone.
    """
    sup = lab.support("patterns_support")
    files = sup.open_cases(lab)
    evidence = {n: files.evidence(n) for n in files.names}  # as if read off the cluster
    orders = sorted(itertools.permutations(Pattern),
                    key=lambda order: [files.pattern(n) for n in files.names] == list(order))
    for order in orders:
        sup.give_verdicts(lab, {n: (p.value, evidence[n]) for n, p in zip(files.names, order, strict=True)})
        try:
            lab.check("case-files")
        except CheckFailed:
            continue
        break


def _old_verdicts_on_new_files(lab: Lab) -> None:
    """The right verdicts of one opening, given in the same order to the Cases of the next."""
    sup = lab.support("patterns_support")
    old = sup.open_cases(lab)
    verdicts = [(old.pattern(n).value, old.evidence(n)) for n in old.names]
    new = sup.open_cases(lab, fresh=True)
    sup.give_verdicts(lab, dict(zip(new.names, verdicts, strict=True)))


WRONG: dict[str, Callable[[Lab], None]] = {
    "the right patterns with evidence from nearby (a ConfigMap, the finalizer, the creator, another policy)":
        _right_patterns_wrong_evidence,
    "every order of the pattern names, tried until the check passes": _every_order_until_it_passes,
    "the right verdicts of the previous case files, given to the new Cases": _old_verdicts_on_new_files,
}
