"""For instructors: a schedule built from each lab's minutes, and who is stuck where.

The schedule follows the Carpentries habit of declaring teaching and exercise minutes per episode and
adding them up, so changing a lab.yaml changes the plan.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import catalog
from .errors import CheckFailed, KrmcourseError


@dataclass
class Slot:
    start: int
    lab: str
    title: str
    teaching: int
    exercises: int


def schedule(start_minutes: int = 0, break_every: int = 90, break_minutes: int = 15) -> list[Slot]:
    """Labs in course order with their start times, with a break after every ``break_every`` minutes."""
    slots, clock, since_break = [], start_minutes, 0
    for spec in catalog.all_labs():
        m = spec.minutes
        total = m["teaching"] + m["exercises"]
        if total == 0:
            continue
        if since_break and since_break + total > break_every:
            slots.append(Slot(clock, "-", "Break", 0, 0))
            clock += break_minutes
            since_break = 0
        slots.append(Slot(clock, spec.name, spec.title, m["teaching"], m["exercises"]))
        clock += total
        since_break += total
    return slots


def format_schedule(slots: list[Slot]) -> str:
    lines = [f"{'start':>6}  {'teach':>5}  {'exer':>4}  lab"]
    for s in slots:
        hh, mm = divmod(s.start, 60)
        lab = "-- break --" if s.lab == "-" else f"{s.lab}: {s.title}"
        lines.append(f"{hh:>3}:{mm:02d}  {s.teaching:>5}  {s.exercises:>4}  {lab}")
    total = slots[-1].start + slots[-1].teaching + slots[-1].exercises - slots[0].start if slots else 0
    lines.append(f"total: {total // 60} h {total % 60:02d} min")
    return "\n".join(lines)


def progress(lab_names: list[str] | None = None) -> list[dict[str, str]]:
    """Run every check of every running lab: one row per exercise with 'solved', 'stuck' or 'not up'."""
    from .lab import Lab

    rows = []
    for spec in catalog.all_labs():
        if lab_names and spec.name not in lab_names:
            continue
        if not spec.exercises:
            continue
        lab = Lab(spec.name, say=lambda _msg: None)
        try:
            running = lab.provider.exists(lab.cluster)
        except KrmcourseError:
            running = False
        for ex in spec.exercises:
            if not running:
                rows.append({"lab": spec.name, "exercise": ex.id, "state": "not up", "hint": ""})
                continue
            try:
                lab.check(ex.id)
                rows.append({"lab": spec.name, "exercise": ex.id, "state": "solved", "hint": ""})
            except CheckFailed as exc:
                rows.append({"lab": spec.name, "exercise": ex.id, "state": "stuck", "hint": exc.message})
            except KrmcourseError as exc:
                rows.append({"lab": spec.name, "exercise": ex.id, "state": "error", "hint": exc.message})
            except Exception as exc:  # noqa: BLE001 - one check's own fault must not hide the rest of the room
                rows.append({"lab": spec.name, "exercise": ex.id, "state": "error",
                             "hint": f"the check itself failed: {type(exc).__name__}: {exc}"})
    return rows
