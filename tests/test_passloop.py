"""krmcourse.passloop on a real cluster: watches wake a pass at once; the resync only backs them up.

A tiny controller built on passloop.run watches ConfigMaps with a short resync. It must notice a new
ConfigMap within a couple of seconds (a watch event, far sooner than the resync), run no passes while
nothing changes, and still run one pass when the resync period elapses with no events at all.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from krmcourse import Lab, ManagedProcess

pytestmark = pytest.mark.cluster
RESYNC = 8.0

CONTROLLER = """
import logging
import sys
import time

from krmcourse.passloop import log, objects, run

logging.getLogger("controller.passloop").setLevel(logging.DEBUG)  # log why each pass runs
count = 0


def reconcile_all(api):
    global count
    count += 1
    names = sorted(o.name for o in objects(api, "configmaps", namespace="passloop"))
    log.info("pass %d at %.3f saw %s", count, time.time(), ",".join(names) or "-")


run("probe", reconcile_all, watch=["configmaps"], resync=float(sys.argv[1]))
"""
PASS = re.compile(r"pass (\d+) at ([\d.]+) saw (\S+)")
REASON = re.compile(r"pass \((\w+)\)")


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    lab = Lab("sandbox", instance="passloop").up()
    lab.kubectl("create", "namespace", "passloop")
    yield lab
    lab.down()


def passes(proc: ManagedProcess) -> list[tuple[str, int, float, str]]:
    """(reason, number, wall time, names seen) for every pass so far, from the controller's log."""
    logs = proc.logs()
    reasons = REASON.findall(logs)
    found = [(int(n), float(t), seen) for n, t, seen in PASS.findall(logs)]
    return [(reasons[i] if i < len(reasons) else "?", *p) for i, p in enumerate(found)]


def test_watch_wakes_a_pass_long_before_the_resync(lab: Lab, tmp_path: Path) -> None:
    script = tmp_path / "probe_controller.py"
    script.write_text(CONTROLLER)
    proc = lab.run_controller(script, str(RESYNC), name="passloop-probe")
    try:
        proc.wait_for_log("first pass done", timeout=60)

        changed = time.time()
        lab.apply("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ping, namespace: passloop}\n")
        woke = lab.wait_until(
            lambda: next((p for p in passes(proc) if "ping" in p[3].split(",")), None),
            timeout=RESYNC,
            interval=0.05,
            message="the new ConfigMap was not seen before the resync period",
        )
        latency = woke[2] - changed
        print(f"watch-driven pass {latency:.2f}s after the change (resync {RESYNC:.0f}s)")
        assert woke[0] == "events" and latency < RESYNC / 4, woke
        before = [p[0] for p in passes(proc) if p[1] < woke[1]]
        assert before == ["start"], f"passes without any change: {before}"

        # No more changes: the next pass is the safety net, one resync period after the last pass. That it
        # is a resync pass, and the very next one, proves the loop did nothing in a whole quiet period.
        last = woke
        resynced = lab.wait_until(
            lambda: next((p for p in passes(proc) if p[1] > last[1]), None),
            timeout=RESYNC + 10,
            interval=0.2,
            message="no pass happened at the resync period",
        )
        gap = resynced[2] - last[2]
        print(f"resync pass {gap:.2f}s after the previous one")
        assert resynced[0] == "resync" and resynced[1] == last[1] + 1, f"passes without any change: {passes(proc)}"
        assert RESYNC - 0.5 <= gap <= RESYNC + 3, (resynced, gap)
    finally:
        proc.stop()
