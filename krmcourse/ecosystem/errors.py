"""Errors of the ecosystem data package, each saying what to do next."""

from __future__ import annotations

from krmcourse.errors import KrmcourseError


class EcosystemError(KrmcourseError):
    """Base class for errors about the ecosystem dataset."""


class SourceError(EcosystemError):
    """A pinned source could not be fetched, or its bytes are not the pinned ones."""


class DatasetError(EcosystemError):
    """The committed tables are missing or do not look like the ones rebuild.py writes."""
