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


class KubectlError(KrmcourseError):
    """kubectl exited non-zero (exit code 6). ``stderr`` holds what the API server said."""

    exit_code = 6

    def __init__(self, args: list[str], returncode: int, stderr: str) -> None:
        super().__init__(f"kubectl {' '.join(args)} failed (exit {returncode}): {stderr.strip()}")
        self.args_ = args
        self.returncode = returncode
        self.stderr = stderr
