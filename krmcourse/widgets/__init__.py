"""Notebook widgets that draw what is in a lab cluster, each a pure data model plus a thin view.

>>> from krmcourse.widgets import OwnershipTree, EventTimeline   # doctest: +SKIP
"""

from .ownership import OwnerNode, OwnershipGraph, OwnershipTree, collect_namespace, render_text
from .timeline import EventTimeline, TimelineEntry, WatchRecorder, describe_change, entries_from_events

__all__ = [
    "EventTimeline",
    "OwnerNode",
    "OwnershipGraph",
    "OwnershipTree",
    "TimelineEntry",
    "WatchRecorder",
    "collect_namespace",
    "describe_change",
    "entries_from_events",
    "render_text",
]
