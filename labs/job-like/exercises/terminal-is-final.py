"""Exercise: the API server itself refuses to undo a Backup's Complete or Failed condition.

The check asks the API server with dry-run status patches on throw-away probe Backups: each move that
undoes or contradicts a terminal condition must be refused, and a running Backup must still be allowed
to report that it finished (a rule that freezes the whole status would stop the controller too).
"""

from collections.abc import Callable
from types import ModuleType

from krmcourse import CheckFailed, Lab

# For every terminal condition that was True: it is still True, and no other terminal condition is.
RULE = {
    "rule": "!has(oldSelf.conditions) || oldSelf.conditions.all(o, "
    "!(o.type in ['Complete', 'Failed'] && o.status == 'True') || (has(self.conditions) "
    "&& self.conditions.exists(n, n.type == o.type && n.status == 'True') "
    "&& self.conditions.all(n, n.type == o.type || !(n.type in ['Complete', 'Failed'] && n.status == 'True'))))",
    "message": "a Backup that is Complete or Failed is final",
}
PATH = "/spec/versions/0/schema/openAPIV3Schema/properties/status/x-kubernetes-validations"


def _probes(lab: Lab) -> ModuleType:
    return lab.support("probes")


def check(lab: Lab) -> None:
    """Ask the API server with dry-run status patches on throw-away probe Backups."""
    for move, refusal in _probes(lab).terminal_refusals(lab).items():
        if refusal is None:
            raise CheckFailed(
                f"The API server accepted a status change ({move}): a terminal condition can still be undone "
                "or contradicted. Compare the old and new status.conditions in a rule on the status schema."
            )
    refusal = _probes(lab).progress_refusal(lab)
    if refusal is not None:
        raise CheckFailed(
            "Terminal conditions are safe, but a Backup that is still Running can no longer report that it "
            f"finished: the API server refused the move Running -> Complete ({refusal}). Only a status that "
            "was already Complete or Failed should be frozen."
        )


def solve(lab: Lab) -> None:
    _probes(lab).add_rules(lab, [{"op": "add", "path": PATH, "value": [RULE]}],
                           lambda: lab.solved("terminal-is-final"), "the transition rule")


def _set_status_rule(lab: Lab, rule: dict[str, str], enforced: Callable[[], bool]) -> None:
    """Put one rule on the status schema and wait until the API server enforces it."""
    _probes(lab).add_rules(lab, [{"op": "add", "path": PATH, "value": [rule]}], enforced)


def _running_again_refused(lab: Lab) -> bool:
    """Whether the API server refuses to turn a Complete probe back to Running."""
    return _probes(lab).terminal_refusals(lab)["Complete -> Running again"] is not None


def _freeze_the_whole_status(lab: Lab) -> None:
    """Copy the spec's immutability rule onto status: nothing in it may change once written."""
    _set_status_rule(lab, {"rule": "self == oldSelf", "message": "status is final"},
                     lambda: _running_again_refused(lab))


def _only_keep_the_old_condition(lab: Lab) -> None:
    """Keep a terminal condition True, but forget to stop the other terminal condition joining it."""
    rule = {
        "rule": "!has(oldSelf.conditions) || oldSelf.conditions.all(o, "
        "!(o.type in ['Complete', 'Failed'] && o.status == 'True') || (has(self.conditions) "
        "&& self.conditions.exists(n, n.type == o.type && n.status == 'True')))",
        "message": "a terminal condition stays True",
    }
    _set_status_rule(lab, rule, lambda: _running_again_refused(lab) and _probes(lab).progress_refusal(lab) is None)


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "freeze the whole status with self == oldSelf": _freeze_the_whole_status,
    "keep the old terminal condition, but allow a second one": _only_keep_the_old_condition,
}
