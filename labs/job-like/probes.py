"""Probe Backups that ask the API server, not the controller, whether a rule is enforced.

Used by the exercise checks and the notebook. A probe carries the label joblike.krmcourse.dev/probe,
which the reference controller ignores, so it never starts a Job for one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from krmcourse import Lab
from krmcourse.errors import KubectlError

BACKUPS = "backups.joblike.krmcourse.dev"
SCHEMA = "/spec/versions/0/schema/openAPIV3Schema"
NAMESPACE = "shop"


def conditions(**statuses: str) -> dict[str, Any]:
    """A status holding these conditions, for example ``conditions(Complete="True")``."""
    return {"conditions": [{"type": t, "status": s, "reason": "Probe"} for t, s in statuses.items()]}


def make_probe(lab: Lab, name: str, terminal: str | None = None) -> None:
    """A fresh probe Backup, optionally already ``terminal`` ('Complete'|'Failed') through the status subresource."""
    lab.kubectl("delete", BACKUPS, name, "-n", NAMESPACE, "--ignore-not-found", "--wait=true")
    lab.apply(
        {
            "apiVersion": "joblike.krmcourse.dev/v1",
            "kind": "Backup",
            "metadata": {
                "name": name,
                "namespace": NAMESPACE,
                "labels": {"joblike.krmcourse.dev/probe": "true"},
            },
            "spec": {"database": "probe"},
        }
    )
    if terminal:
        patch_status(lab, name, conditions(Running="False", **{terminal: "True"}))


def patch_status(lab: Lab, name: str, status: dict[str, Any], dry_run: bool = False) -> str | None:
    """Patch a probe's status; returns None when accepted, or the API server's refusal."""
    return _patch(lab, name, {"status": status}, "status", dry_run)


def patch_spec(lab: Lab, name: str, spec: dict[str, Any], dry_run: bool = True) -> str | None:
    """Patch a probe's spec; returns None when accepted, or the API server's refusal."""
    return _patch(lab, name, {"spec": spec}, None, dry_run)


def _patch(lab: Lab, name: str, body: dict[str, Any], subresource: str | None, dry_run: bool) -> str | None:
    args = ["patch", BACKUPS, name, "-n", NAMESPACE, "--type=merge", "-p", json.dumps(body)]
    if subresource:
        args.append(f"--subresource={subresource}")
    if dry_run:
        args.append("--dry-run=server")
    try:
        lab.kubectl(*args)
    except KubectlError as exc:
        return exc.stderr.strip()
    return None


def remove_probe(lab: Lab, name: str) -> None:
    lab.kubectl("delete", BACKUPS, name, "-n", NAMESPACE, "--ignore-not-found", "--wait=false")


MOVES = {  # name: (terminal condition at the start, the status a client then tries to write)
    "Complete -> Running again": ("Complete", conditions(Running="True")),
    "Failed -> Complete": ("Failed", conditions(Running="False", Failed="False", Complete="True")),
    "Complete -> Complete and Failed": ("Complete", conditions(Running="False", Complete="True", Failed="True")),
}


def terminal_refusals(lab: Lab) -> dict[str, str | None]:
    """Try to undo or contradict terminal probes' conditions (dry run); what did the API server say?"""
    answers: dict[str, str | None] = {}
    for move, (start, status) in MOVES.items():
        name = f"probe-{start.lower()}"
        make_probe(lab, name, start)
        answers[move] = patch_status(lab, name, status, dry_run=True)
        remove_probe(lab, name)
    return answers


SPEC_CHANGES: dict[str, dict[str, Any]] = {  # the part of the request a client tries to change: the spec patch it sends
    "spec.database": {"database": "something-else"},
    "spec.simulate": {"simulate": {"after": "9s"}},
}


def spec_refusals(lab: Lab) -> dict[str, str | None]:
    """Try to change each part of a probe's request (dry run); None means that change was accepted."""
    make_probe(lab, "probe-spec")
    answers = {field: patch_spec(lab, "probe-spec", change) for field, change in SPEC_CHANGES.items()}
    remove_probe(lab, "probe-spec")
    return answers


def progress_refusal(lab: Lab) -> str | None:
    """Report a probe's progress as the controller does: Running, then Complete (a dry run).

    None means the API server accepted both writes; otherwise its first refusal. A rule that freezes
    the status, or the whole object, refuses one of them, and the controller could never finish a Backup.
    """
    make_probe(lab, "probe-running")
    answer = patch_status(lab, "probe-running", conditions(Running="True")) or patch_status(
        lab, "probe-running", conditions(Running="False", Complete="True"), dry_run=True
    )
    remove_probe(lab, "probe-running")
    return answer


def add_rules(lab: Lab, ops: list[dict[str, Any]], enforced: Callable[[], bool], what: str = "the rule") -> None:
    """JSON-patch the Backup CRD's schema with ``ops``, then wait until ``enforced`` says the API server
    applies the change: it switches to a new schema asynchronously."""
    lab.kubectl("patch", "crd", BACKUPS, "--type=json", "-p", json.dumps(ops))
    lab.wait_until(enforced, timeout=30, interval=0.5, message=f"the API server did not start enforcing {what}")
