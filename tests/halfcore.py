"""A CPU cgroup that holds a command, and every process it starts, to a share of one core.

The kernel enforces the share with the CFS bandwidth controller: a quota of CPU time per period
(``cpu.cfs_quota_us`` per ``cpu.cfs_period_us`` on cgroup v1, ``cpu.max`` on v2). A process started in
the cgroup and all its descendants (a pytest, its notebook kernels, and the lab clusters and
controllers those start) share that quota, however idle the rest of the machine is. That is a slow
laptop, made on purpose: tests/test_half_core.py runs Part V's notebooks in one.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import psutil

V1 = Path("/sys/fs/cgroup/cpu")  # cgroup v1 (or hybrid): the cpu controller's own hierarchy
V2 = Path("/sys/fs/cgroup")  # cgroup v2: one hierarchy, cpu.max in each group
PERIOD_US = 100_000


def problem() -> str | None:
    """Why this process cannot hold a command to a CPU quota here, or None."""
    if os.geteuid() != 0:
        return "making a cgroup needs root (run as root, as CI does)"
    if (V1 / "cpu.cfs_quota_us").is_file():
        return None if os.access(V1, os.W_OK) else f"{V1} is not writable (a read-only cgroup mount)"
    controllers = V2 / "cgroup.controllers"
    if controllers.is_file() and "cpu" in controllers.read_text().split():
        return None if os.access(V2, os.W_OK) else f"{V2} is not writable (a read-only cgroup mount)"
    return f"no CPU cgroup controller: neither {V1}/cpu.cfs_quota_us (cgroup v1) nor 'cpu' in {controllers} (v2)"


class CpuQuota:
    """One new cgroup, limited to ``share`` of one core; :meth:`popen` starts a command inside it."""

    def __init__(self, name: str, share: float) -> None:
        self.share = share
        self.v1 = (V1 / "cpu.cfs_quota_us").is_file()
        self.path = (V1 if self.v1 else V2) / f"{name}-{os.getpid()}"
        self.path.mkdir()
        quota = int(share * PERIOD_US)
        if self.v1:
            (self.path / "cpu.cfs_period_us").write_text(str(PERIOD_US))
            (self.path / "cpu.cfs_quota_us").write_text(str(quota))
        else:
            subtree = V2 / "cgroup.subtree_control"
            if "cpu" not in subtree.read_text().split():
                subtree.write_text("+cpu")
            (self.path / "cpu.max").write_text(f"{quota} {PERIOD_US}")

    def popen(self, cmd: Sequence[str], **kwargs: object) -> subprocess.Popen[bytes]:
        """Start ``cmd`` in the cgroup: the child joins it before it runs the command, so it and every
        process it starts are held by the quota from their first instruction."""
        procs = self.path / "cgroup.procs"

        def join() -> None:
            procs.write_text(str(os.getpid()))

        return subprocess.Popen(cmd, preexec_fn=join, **kwargs)  # type: ignore[call-overload]  # noqa: PLW1509

    def pids(self) -> list[int]:
        """The processes in the cgroup now."""
        return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]

    def names(self) -> set[str]:
        """The names of the processes in the cgroup now."""
        found = set()
        for pid in self.pids():
            try:
                found.add(psutil.Process(pid).name())
            except psutil.Error:
                continue
        return found

    def quota(self) -> float:
        """The share of one core the group may use, as the kernel reads it back."""
        if self.v1:
            quota = int((self.path / "cpu.cfs_quota_us").read_text())
            return quota / int((self.path / "cpu.cfs_period_us").read_text())
        quota_us, period_us = (self.path / "cpu.max").read_text().split()
        return int(quota_us) / int(period_us)

    def throttled(self) -> tuple[int, float]:
        """How many periods the quota stopped the group, and for how many seconds in all."""
        stat = dict(line.split() for line in (self.path / "cpu.stat").read_text().splitlines())
        if self.v1:
            return int(stat["nr_throttled"]), int(stat["throttled_time"]) / 1e9
        return int(stat["nr_throttled"]), int(stat["throttled_usec"]) / 1e6

    def remove(self, timeout: float = 30) -> list[int]:
        """Kill what is still in the cgroup (each was started by the command this test ran), then remove
        it. Returns the pids that had to be killed."""
        killed = []
        deadline = time.monotonic() + timeout
        while self.path.exists():
            left = self.pids()
            for pid in left:
                try:
                    os.kill(pid, 9)
                    killed.append(pid)
                except ProcessLookupError:
                    continue
            try:
                self.path.rmdir()
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        return sorted(set(killed))


@contextmanager
def cpu_quota(name: str, share: float) -> Iterator[CpuQuota]:
    """A cgroup limited to ``share`` of a core for as long as the block runs, then removed."""
    group = CpuQuota(name, share)
    try:
        yield group
    finally:
        group.remove()
