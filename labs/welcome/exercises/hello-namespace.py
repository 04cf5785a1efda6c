"""Exercise: create a Namespace called ``hello``, the learner's first object in a lab cluster.

The check reads the Namespace back from the API server and also wants it Active, so a namespace
that is being deleted (after a learner tried ``kubectl delete``) does not count.
"""

from __future__ import annotations

from krmcourse import CheckFailed, Lab

NAME = "hello"


def check(lab: Lab) -> None:
    namespace = lab.get("namespace", NAME)
    if namespace is None:
        raise CheckFailed(f"The cluster has no Namespace called {NAME!r} yet.")
    phase = (namespace.get("status") or {}).get("phase")
    if phase != "Active":
        raise CheckFailed(
            f"The Namespace {NAME!r} exists but its phase is {phase!r}, not Active: "
            "it is being deleted. Wait until it is gone, then try again."
        )


def solve(lab: Lab) -> None:
    lab.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAME}})
    lab.wait_until(
        lambda: (lab.get("namespace", NAME) or {}).get("status", {}).get("phase") == "Active",
        timeout=30,
        message=f"Namespace {NAME} did not become Active",
    )
