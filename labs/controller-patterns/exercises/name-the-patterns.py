"""Exercise: name the pattern of the controller behind each of the lab's four example objects.

Answers go into the ConfigMap ``demo/patterns``: one key per example (``deployment.web``, ``hpa.web``,
``policy.replica-limit``, ``service.web-public``), each value a pattern name. The check marks them
with the course's quiz grading and names the keys that are still wrong, never their answers.
"""

from __future__ import annotations

from krmcourse import CheckFailed, Lab
from krmcourse.quiz import grade


def check(lab: Lab) -> None:
    sup = lab.support("patterns_support")
    cm = lab.get("configmap", "patterns", namespace=sup.NAMESPACE)
    if cm is None:
        raise CheckFailed(f"There is no ConfigMap patterns in the {sup.NAMESPACE} namespace yet.")
    data = cm.get("data") or {}
    try:
        score = grade(data, sup.EXAMPLES)
    except (KeyError, ValueError) as exc:
        raise CheckFailed(f"The ConfigMap patterns has a problem: {exc}") from exc
    if score.wrong:
        raise CheckFailed(f"{score}. Look again at: {', '.join(score.wrong)}.")


def solve(lab: Lab) -> None:
    sup = lab.support("patterns_support")
    args = [f"--from-literal={q.id}={q.answer.value}" for q in sup.EXAMPLES]
    lab.kubectl("create", "configmap", "patterns", "-n", sup.NAMESPACE, *args)
