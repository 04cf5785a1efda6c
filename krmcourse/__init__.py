"""krmcourse: a real Kubernetes cluster for every lab of the course.

>>> from krmcourse import Lab
>>> lab = Lab("welcome").up()          # doctest: +SKIP
>>> lab.check("hello-namespace")       # doctest: +SKIP
"""

from .errors import (
    CheckFailed,
    ClusterError,
    KrmcourseError,
    KubectlError,
    PortInUseError,
    ProviderError,
    ToolchainError,
    UnknownExerciseError,
    UnknownLabError,
    UsageError,
)
from .lab import Lab
from .processes import ManagedProcess

__version__ = "0.1.0"

__all__ = [
    "CheckFailed",
    "ClusterError",
    "KrmcourseError",
    "KubectlError",
    "Lab",
    "ManagedProcess",
    "PortInUseError",
    "ProviderError",
    "ToolchainError",
    "UnknownExerciseError",
    "UnknownLabError",
    "UsageError",
]
