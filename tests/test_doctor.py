"""``krmcourse doctor`` finds what a crashed session leaves behind, and ``--fix`` cleans it up."""

from __future__ import annotations

import os
import signal

import psutil
import pytest

from krmcourse import Lab, doctor

pytestmark = [pytest.mark.cluster, pytest.mark.kwok]


def test_doctor_reports_a_broken_cluster_and_leaked_processes_then_fixes_them():
    lab = Lab("sandbox", instance="doctor", say=lambda _m: None).up()
    try:
        pids = lab.component_pids()
        os.kill(pids["kube-scheduler"], signal.SIGKILL)
        lab.wait_until(lambda: not lab.status()["components"]["kube-scheduler"], timeout=10)
        findings = doctor.examine()
        broken = [f for f in findings if not f.ok and lab.cluster in f.what]
        assert broken and "kube-scheduler" in broken[0].what and "reset sandbox" in broken[0].fix

        # A state folder that vanished (a crashed session, a deleted folder) orphans its processes.
        lab.kubeconfig.unlink()
        leaked = [f for f in doctor.examine() if f.what.startswith("leaked process")]
        assert len(leaked) >= 4, leaked
        assert any("holding port" in f.what for f in leaked)
        doctor.fix()
        assert not [p for p in pids.values() if psutil.pid_exists(p)
                    and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
        assert not [f for f in doctor.examine() if not f.ok and lab.cluster in f.what]
    finally:
        lab.down()
