"""The errors krmcourse raises: each says what happened and what to do next.

Every error carries an exit code so that the CLI and scripts can tell failures apart. The codes are
documented in the README.
"""

from __future__ import annotations


class KrmcourseError(Exception):
    """Base class. ``hint`` tells the learner what to do next."""

    exit_code = 1

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}\n  -> {self.hint}" if self.hint else self.message


class CheckFailed(KrmcourseError):
    """An exercise check found that the cluster does not solve the exercise yet (exit code 1)."""

    exit_code = 1


class UsageError(KrmcourseError):
    """Bad input: an unknown lab or exercise, a bad option (exit code 2)."""

    exit_code = 2


class UnknownLabError(UsageError):
    """There is no lab folder of that name."""


class UnknownExerciseError(UsageError):
    """The lab has no exercise of that id."""


class ToolchainError(KrmcourseError):
    """Go is missing or too old, or building a component failed (exit code 3)."""

    exit_code = 3


class ProviderError(KrmcourseError):
    """No cluster provider can serve, or the chosen one is not usable here (exit code 4)."""

    exit_code = 4


class PortInUseError(ProviderError):
    """A port the cluster needs is taken by another process."""


class CapabilityError(ProviderError):
    """The lab asked its provider for something only other providers can do."""

    def __init__(self, provider: str, capability: str, what: str) -> None:
        super().__init__(f"The {provider} provider cannot {what} (it lacks the '{capability}' capability).",
                         "Skip this step, or run the lab on a provider that has it: KRMCOURSE_PROVIDER=kwok "
                         "(the default) can do everything the course shows.")
        self.provider = provider
        self.capability = capability


class ClusterError(KrmcourseError):
    """A lab cluster failed to start, is unhealthy, or its state folder is broken (exit code 5)."""

    exit_code = 5


class ComponentStoppedError(ClusterError):
    """A control-plane component stopped while its cluster was starting; a fresh start may succeed."""


class LabNotUpError(ClusterError):
    """A command needs the lab's cluster, and it is not up (exit code 5, as every cluster error).

    Every command that talks to a lab's cluster checks this first (:meth:`krmcourse.lab.Lab.require_up`),
    so that each says the same thing, rather than whatever kubectl makes of a missing kubeconfig."""

    def __init__(self, lab: str, instance: str | None = None) -> None:
        which = f" --instance {instance}" if instance else ""
        named = f"Lab {lab}" + (f" (instance {instance})" if instance else "")
        super().__init__(f"{named} is not up.", f"Run 'krmcourse up {lab}{which}' first.")
        self.lab = lab
        self.instance = instance


class KubectlError(KrmcourseError):
    """kubectl exited non-zero (exit code 6). ``stderr`` holds what the API server said."""

    exit_code = 6

    def __init__(self, args: list[str], returncode: int, stderr: str) -> None:
        super().__init__(f"kubectl {' '.join(args)} failed (exit {returncode}): {stderr.strip()}",
                         kubectl_hint(stderr))
        self.args_ = args
        self.returncode = returncode
        self.stderr = stderr


#: What kubectl's (or the API server's) words usually mean for a learner, and the next step, in order.
_KUBECTL_HINTS = (
    (("timed out waiting for the condition",),
     "The object did not reach that state in time: 'kubectl describe' it, and read its events and the "
     "logs of the controller that should act on it."),
    (("the server doesn't have a resource type", "no matches for kind"),
     "The API server does not serve that kind (yet): check its spelling with 'kubectl api-resources', "
     "or apply its CRD and wait until it is Established."),
    (("denied the request", "denied request", "ValidatingAdmissionPolicy"),
     "An admission webhook or policy refused the request: its message above says which rule, and why."),
    (("forbidden",),
     "The identity used has no RBAC permission for this: 'kubectl auth can-i VERB RESOURCE --as ...' "
     "shows what it may do, and a Role or ClusterRole plus a binding grants the rest."),
    (("the object has been modified", "Conflict"),
     "Someone wrote the object after you read it (optimistic concurrency): read it again, re-apply your "
     "change, and send it once more."),
    (("is invalid", "Invalid value", "Required value", "Unsupported value"),
     "The API server's validation rejected the object: the message names the field and the rule."),
    (("AlreadyExists", "already exists"),
     "An object of that name exists already: 'kubectl apply' updates it, or delete it first."),
    (("NotFound", "not found"),
     "Nothing of that name exists there: check the name and the namespace ('kubectl get KIND -A')."),
    (("connection refused", "Unable to connect", "was refused", "no such host", "i/o timeout"),
     "The lab's cluster does not answer: 'krmcourse status' shows it, 'krmcourse up LAB' starts it, and "
     "'krmcourse doctor' finds what is broken."),
)


def kubectl_hint(stderr: str) -> str:
    """The next step for a kubectl failure, from what it printed; empty when nothing is recognised."""
    for needles, hint in _KUBECTL_HINTS:
        if any(n in stderr for n in needles):
            return hint
    return ""


class WaitTimeout(KrmcourseError, TimeoutError):
    """Something the course waited for did not happen in time (exit code 7). Also a TimeoutError."""

    exit_code = 7
