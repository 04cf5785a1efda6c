"""krmcourse.passloop on a real cluster: watches wake a pass at once; the resync only backs them up.

A tiny controller built on passloop.run watches ConfigMaps with a short resync. A new ConfigMap must
wake a pass for its watch event (the pass says why it ran), with no pass between the first and that
one; then, while nothing changes, the very next pass must be a resync, and not before the resync
period has passed. The test asserts on the order of the passes and their reasons, and on the one
bound that no load can break (a resync never comes early); how soon after an event a pass runs is
printed, as a benchmark would, since a busy machine only makes it later.
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
            timeout=RESYNC + 60,  # only a guard: the pass's reason says what woke it
            interval=0.05,
            message="no pass saw the new ConfigMap",
        )
        latency = woke[2] - changed
        print(f"watch-driven pass {latency:.2f}s after the change (resync {RESYNC:.0f}s)")
        assert woke[0] == "events", f"the first pass to see the new ConfigMap was not woken by its event: {woke}"
        before = [p[0] for p in passes(proc) if p[1] < woke[1]]
        assert before == ["start"], f"passes without any change: {before}"

        # No more changes: the next pass is the safety net, one resync period after the last pass. That it
        # is a resync pass, and the very next one, proves the loop did nothing in a whole quiet period.
        last = woke
        resynced = lab.wait_until(
            lambda: next((p for p in passes(proc) if p[1] > last[1]), None),
            timeout=RESYNC + 60,  # only a guard: the order and the reason below are the test
            interval=0.2,
            message="no pass happened after the resync period",
        )
        gap = resynced[2] - last[2]
        print(f"resync pass {gap:.2f}s after the previous one (resync {RESYNC:.0f}s)")
        assert resynced[0] == "resync" and resynced[1] == last[1] + 1, f"passes without any change: {passes(proc)}"
        assert gap >= RESYNC - 0.5, f"the resync pass came {gap:.2f}s after the previous one, before its period"
    finally:
        proc.stop()
