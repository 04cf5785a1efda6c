"""Choosing where a lab's cluster comes from: ``kwok`` (default), ``kind`` or ``existing``.

The choice is, in order: the explicit argument (``--provider``), ``KRMCOURSE_PROVIDER``, then the
first provider that can serve here: kwok when Go or a built toolchain is present, else kind when a
container engine answers.
"""

from __future__ import annotations

import os

from ..errors import ProviderError, UsageError
from .base import ClusterOptions, Provider, check_port_free
from .existing import ExistingProvider
from .kind import KindProvider
from .kwok import KwokProvider

PROVIDERS: dict[str, type[Provider]] = {"kwok": KwokProvider, "kind": KindProvider, "existing": ExistingProvider}

__all__ = ["ClusterOptions", "Provider", "check_port_free", "owning_providers", "select", "PROVIDERS"]


def owning_providers() -> list[Provider]:
    """The providers that create (and so must clean up) clusters of their own."""
    return [KwokProvider(), KindProvider()]


def select(name: str | None = None) -> Provider:
    """The provider to use: explicit, then from the environment, then the first usable one."""
    name = name or os.environ.get("KRMCOURSE_PROVIDER") or None
    if name:
        if name not in PROVIDERS:
            raise UsageError(f"Unknown provider {name!r}.", f"Choose one of: {', '.join(PROVIDERS)}.")
        return PROVIDERS[name]()
    reasons = []
    for candidate in (KwokProvider(), KindProvider()):
        problem = candidate.usable()
        if problem is None:
            return candidate
        reasons.append(f"  {candidate.name}: {problem}")
    raise ProviderError("No cluster provider can serve on this machine:\n" + "\n".join(reasons),
                        "Install Go 1.26+ (for the default, Docker-free clusters), or Docker and kind; "
                        "or use a cluster you already have: KRMCOURSE_PROVIDER=existing.")
