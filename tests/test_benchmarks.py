"""The pure parts of the benchmarks, on real data: benchmarks/room.py's readings of /proc (smaps_rollup for
PSS, stat for CPU time) checked against this very process, and its summaries. The figures themselves are
measured by the scripts in benchmarks/, never here."""

from __future__ import annotations

import os
import resource
from pathlib import Path
from types import ModuleType

import psutil
import pytest

from krmcourse.labcode import script_module

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.fixture(scope="module")
def room() -> ModuleType:
    return script_module(BENCHMARKS / "room.py")  # (with its neighbour record.py, as a script finds it)


def test_smaps_rollup_of_this_process_gives_its_rss_and_a_smaller_pss(room: ModuleType) -> None:
    text = Path("/proc/self/smaps_rollup").read_text()
    fields = room.parse_smaps_rollup(text)
    assert {"Rss", "Pss", "Anonymous", "Shared_Clean"} <= fields.keys(), fields
    # The same figures the kernel gives elsewhere, read a moment apart (a few MiB of slack).
    rss_kib = psutil.Process().memory_info().rss / 1024
    assert abs(fields["Rss"] - rss_kib) < 8 * 1024, (fields["Rss"], rss_kib)
    # Python's code, and the C libraries, are mapped from files: PSS counts what is shared only in part.
    assert 0 < fields["Pss"] <= fields["Rss"], fields
    assert fields["Anonymous"] < fields["Rss"], fields


def test_memory_of_this_process_in_mib_matches_psutil(room: ModuleType) -> None:
    got = room.memory_mib([os.getpid(), 2**22 + 1])  # a pid that cannot run (above pid_max's default) is left out
    full = psutil.Process().memory_full_info()
    assert abs(got["pss_mib"] - full.pss / 2**20) < 8, (got, full)
    assert 0 < got["anon_mib"] <= got["rss_mib"], got


def test_cpu_ticks_from_proc_stat_follow_the_time_this_process_spends(room: ModuleType) -> None:
    before = room.cpu_ticks([os.getpid()])
    start = resource.getrusage(resource.RUSAGE_SELF)
    total = 0
    while resource.getrusage(resource.RUSAGE_SELF).ru_utime - start.ru_utime < 0.3:  # busy: 0.3 s of CPU
        total += sum(range(1000))
    after = room.cpu_ticks([os.getpid()])
    spent = after[os.getpid()] - before[os.getpid()]
    assert 0.2 <= spent / room.CLOCK_TICKS <= 2, spent  # (ticks are 1/100 s, and the tests' own threads run too)
    assert room.cores_used(before, after, 1.0) == round(spent / room.CLOCK_TICKS, 4)


def test_a_command_name_with_spaces_and_parentheses_does_not_shift_the_fields(room: ModuleType) -> None:
    fields = Path("/proc/self/stat").read_text().split(") ", 1)[1]
    assert room.parse_stat_ticks(f"12 (a (b) c) {fields}") == room.parse_stat_ticks(f"12 (python) {fields}")


def test_summaries_and_the_extrapolation(room: ModuleType) -> None:
    assert room.summary([3.0, 1.0, 2.0]) == {"median": 2.0, "min": 1.0, "max": 3.0, "sum": 6.0}
    assert room.summary([]) == {}
    # 20 GiB left, 500 MiB each: 40; 4 learners idle at 0.2 cores: 0.05 each, and 1 of 2 cores holds 20.
    assert room.fits(20480, 500, 0.2, 4, 2) == {"by_memory": 40, "by_idle_cpu": 20}
    assert room.fits(20480, 0, 0, 4, 2) == {"by_memory": 0, "by_idle_cpu": 0}


def test_a_learners_processes_are_told_apart_by_their_command_line(room: ModuleType) -> None:
    assert room.part_of("/opt/venv/bin/python /opt/venv/bin/jupyterhub-singleuser") == "jupyterlab"
    assert room.part_of("/opt/venv/bin/python -m ipykernel_launcher -f /home/x/kernel-1.json") == "kernel"
    assert room.part_of("/opt/cache/toolchain/kube-apiserver --etcd-servers=http://127.0.0.1:2379") == "cluster"
    parts = room.memory_by_part([os.getpid()])
    assert list(parts) == [room.part_of(" ".join(psutil.Process().cmdline()))], parts
