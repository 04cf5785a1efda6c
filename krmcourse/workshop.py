"""For instructors: a schedule built from each lab's minutes, and who is stuck where.

The schedule follows the Carpentries habit of declaring teaching and exercise minutes per episode and
adding them up, so changing a lab.yaml changes the plan.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from . import catalog
from .errors import CheckFailed, KrmcourseError
from .paths import state_of


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


def progress(lab_names: list[str] | None = None, run: bool = False, state: Path | None = None) -> list[dict[str, str]]:
    """One row per exercise of every lab (or of ``lab_names``): what its check said last ('solved',
    'stuck' with the hint, 'error', or 'not tried'), when, or 'not up'.

    ``state`` reads another user's state folder instead of this one's: the hub's instructor view
    (:mod:`krmcourse.roomview`) reads each learner's, as root.

    By default nothing runs on the learner's cluster: the rows come from the results the learner's own
    checks kept (see :func:`krmcourse.exercises.last_result`). Some checks make load or restart a
    controller, which is the learner's business, not the instructor's view. ``run=True`` runs every
    check again now, and keeps what it says.
    """
    if state is not None:
        with state_of(state):
            return progress(lab_names, run)
    from . import exercises
    from .lab import Lab

    rows = []
    # Only the labs asked for are read (the view asks every few seconds, for every learner).
    specs = [catalog.get(n) for n in lab_names if n in catalog.names()] if lab_names else catalog.all_labs()
    for spec in specs:
        if not spec.exercises:
            continue
        lab = Lab(spec.name, say=lambda _msg: None)
        try:
            running = lab.is_up()  # as every command that needs the cluster asks it (Lab.require_up)
        except KrmcourseError:
            running = False
        for ex in spec.exercises:
            row = {"lab": spec.name, "exercise": ex.id, "state": "not up", "hint": "", "checked": ""}
            rows.append(row)
            if not running:
                continue
            if not run:
                said = exercises.last_result(lab, ex.id) or {"state": "not tried"}
                row.update(state=str(said["state"]), hint=str(said.get("hint", "")),
                           checked=str(said.get("at", "")))
                continue
            row["checked"] = datetime.now(UTC).isoformat(timespec="seconds")
            try:
                lab.check(ex.id)
                row["state"] = "solved"
            except CheckFailed as exc:
                row.update(state="stuck", hint=exc.message)
            except KrmcourseError as exc:
                row.update(state="error", hint=exc.message)
            except Exception as exc:  # noqa: BLE001 - one check's own fault must not hide the rest of the room
                row.update(state="error", hint=f"the check itself failed: {type(exc).__name__}: {exc}")
    return rows
