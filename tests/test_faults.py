"""Every reference controller converges after every fault that can reach it (krmcourse.faults).

For each controller a lab declares, on a fresh cluster at the state its ``converges:`` names: a crash
right after its first write, an API server restart, a watch broken off, a watch ended cleanly, a 410
Gone, events held back 2 s, and a rival writer on a field it owns. Each must end with the lab's
declared convergence within two minutes; a fault that cannot reach the controller (no watch, no write,
no field declared for a rival) is reported as n/a, never as a pass. Each controller declares which faults
it faces (``faces:`` under ``converges:``): one of those that comes out n/a fails the test (the
controller stopped watching, or stopped writing), and so does a fault that reaches it undeclared (the
declaration is out of date). A controller broken on purpose
(its watch keeps an expired resourceVersion) is shown to fail: the harness can catch a real bug.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from krmcourse import Lab, catalog, faults
from krmcourse.errors import WaitTimeout

CONTROLLERS = [(spec.name, name) for spec in catalog.all_labs() for name in spec.controllers]


def test_every_declared_controller_says_what_it_converges_to() -> None:
    missing = [f"{lab}/{name}" for lab, name in CONTROLLERS if catalog.get(lab).controller(name).converges is None]
    assert not missing, f"declare 'converges:' in lab.yaml for: {', '.join(missing)} (labs/README.md)"
    for lab, name in CONTROLLERS:
        conv = catalog.get(lab).controller(name).converges
        assert conv is not None and conv.apply.is_file(), f"{lab}/{name}: {conv.apply if conv else ''} is missing"
    unfaced = [f"{lab}/{name}" for lab, name in CONTROLLERS if not catalog.get(lab).controller(name).converges.faces]
    assert not unfaced, f"declare under 'converges:' the faults each faces ('faces:', labs/README.md): {unfaced}"


def check_outcomes(controller: str, faces: tuple[str, ...], outcomes: dict[str, str]) -> None:
    """Every fault the controller declares it faces reached it, and no other did."""
    missed = {f: o for f, o in outcomes.items() if f in faces and o.startswith("n/a")}
    assert not missed, (f"{controller} declares it faces {', '.join(missed)}, but they could not reach it: "
                        f"{missed}. A controller that stopped watching (or writing) fails here.")
    undeclared = [f for f, o in outcomes.items() if f not in faces and not o.startswith("n/a")]
    assert not undeclared, f"{controller} faced {', '.join(undeclared)} too: add them to its 'faces:' in lab.yaml"


def test_a_declared_fault_that_comes_out_na_fails() -> None:
    """The old test passed as soon as one fault reached the controller; a watcher turned poller must fail."""
    faces = ("API server restart", "410 Gone")
    with pytest.raises(AssertionError, match="declares it faces 410 Gone"):
        check_outcomes("poller", faces, {"API server restart": "3.0 s", "410 Gone": "n/a (it keeps no watch open)"})
    with pytest.raises(AssertionError, match="faced 410 Gone too"):
        check_outcomes("watcher", faces[:1], {"API server restart": "3.0 s", "410 Gone": "0.3 s"})
    check_outcomes("watcher", faces, {"API server restart": "3.0 s", "410 Gone": "0.3 s", "rival writer": "n/a"})


@pytest.mark.cluster
@pytest.mark.faults
@pytest.mark.parametrize(("lab_name", "controller"), CONTROLLERS, ids=[f"{lab}/{c}" for lab, c in CONTROLLERS])
def test_the_controller_converges_after_every_fault(lab_name: str, controller: str) -> None:
    lab = faults.lab_for(lab_name, controller)
    outcomes: dict[str, str] = {}
    failed: dict[str, str] = {}
    try:
        for fault in faults.FAULTS:
            try:
                outcomes[fault] = f"{faults.converge(lab, controller, fault):.1f} s"
            except faults.NotApplicable as why:
                outcomes[fault] = f"n/a ({why})"
            except WaitTimeout as stuck:
                failed[fault] = f"{stuck.message}\n{lab.logs(controller, 25)}"
    finally:
        lab.down()
    print(f"{lab_name}/{controller}: {outcomes}")
    assert not failed, "\n\n".join(f"after {fault}: {why}" for fault, why in failed.items())
    check_outcomes(f"{lab_name}/{controller}", faults.convergence(lab, controller).faces, outcomes)


#: The binder with tests/stubborn.py's list+watch in place of the toolkit's: after a 410 it watches again from
#: the same, expired resourceVersion (kr8s-org/kr8s#476), and so never hears of anything again.
STUBBORN = """
import runpy, sys
from pathlib import Path
from krmcourse import controllerkit
from krmcourse.labcode import script_module

controllerkit.list_then_watch = script_module(Path({stubborn!r})).list_then_watch
sys.argv[0] = {script!r}
runpy.run_path({script!r}, run_name="__main__")
"""


@pytest.mark.cluster
@pytest.mark.faults
def test_a_controller_that_keeps_an_expired_version_is_caught(tmp_path: Path) -> None:
    lab = faults.prepare(Lab("claims", instance="faults-broken", say=lambda _m: None), "binder")
    broken = tmp_path / "stubborn_binder.py"
    broken.write_text(STUBBORN.format(script=str(lab.spec.controller("binder").script),
                                      stubborn=str(Path(__file__).with_name("stubborn.py"))))
    try:
        with pytest.raises(WaitTimeout, match="fault-probe"):
            faults.converge(lab, "binder", "410 Gone", timeout=20, program=broken)
        # The same lab with the real binder, and the broken one after a fault it does survive: the
        # failure above came from the bug, not from the set-up.
        assert faults.converge(lab, "binder", "410 Gone", timeout=60) > 0
        assert faults.converge(lab, "binder", "crash mid-reconcile", timeout=60, program=broken) > 0
    finally:
        lab.down()


@pytest.mark.cluster
@pytest.mark.faults
@pytest.mark.kind
def test_in_a_kind_node_the_kubelet_brings_the_api_server_back_and_the_controller_converges() -> None:
    """What the faults do to a controller does not depend on the provider, so CI runs the matrix above on
    kwok alone. The one fault the providers inject differently is the API server restart: in a kind node
    its static pod leaves the kubelet's folder and comes back as a new pod, which the kubelet stops and
    starts (kwok kills the process outright). That is checked here, on kind."""
    lab = faults.lab_for("claims", "binder")
    try:
        before = lab.component_pids()["kube-apiserver"]
        assert faults.converge(lab, "binder", "API server restart") > 0
        after = lab.component_pids()["kube-apiserver"]
        assert after != before, f"kube-apiserver is still process {before}: it was not restarted"
    finally:
        lab.down()
