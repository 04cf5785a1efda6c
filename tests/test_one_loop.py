"""What the one-loop-per-pattern lab promises beyond its exercises: both forms of the operator converge
after a SIGKILL mid-work, and in separate mode a broken signal stops only the governor loop."""

from __future__ import annotations

import json
from types import ModuleType

import pytest

LAB_NAME = "one-loop-per-pattern"  # the lab fixture (conftest) brings it up for this module

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def ol(lab) -> ModuleType:  # noqa: ANN001
    return lab.support("oneloop_support")


def _image(lab, namespace: str, name: str) -> str | None:  # noqa: ANN001
    obj = lab.get("deployment", name, namespace=namespace)
    return None if obj is None else obj["spec"]["template"]["spec"]["containers"][0]["image"]


@pytest.mark.parametrize("mode", ["separate", "tangled"])
def test_operator_converges_after_sigkill_mid_work(lab, ol, mode: str) -> None:  # noqa: ANN001
    operator = ol.start(lab, mode, mode)
    ol.create_workload(lab, mode)
    # Killed right after its first write, before it finished the first pass over every object.
    lab.wait_until(lambda: any("orders-worker" in line for line in operator.logs()),
                   timeout=30, interval=0.05)
    operator.process.kill()
    assert not operator.process.alive
    # While it is dead, the spec and the signal both change.
    new_image = "registry.example/shop/orders-worker:2.1"
    lab.kubectl("patch", "queueworker", "orders", "-n", mode, "--type=merge", "-p",
                json.dumps({"spec": {"image": new_image}}))
    lab.kubectl("patch", "configmap", "orders-queue", "-n", mode, "--type=merge", "-p",
                json.dumps({"data": {"length": "22"}}))
    operator.process.restart()
    lab.wait_until(lambda: _image(lab, mode, "orders-worker") == new_image, timeout=30,
                   message="the image change was not rolled out after the restart")
    lab.wait_until(lambda: ol.replicas(lab, mode, "orders-worker") == 5, timeout=30,
                   message="orders-worker did not reach ceil(22 / 5) = 5 replicas")
    worker = lab.get("queueworker.ops.krmcourse.dev", "orders", namespace=mode)
    kinds = ("Composed", "Governed") if mode == "separate" else ("Ready",)

    def current() -> bool:
        conds = ol.conditions(lab, mode, "orders")
        return all(conds.get(k, {}).get("status") == "True"
                   and conds[k].get("observedGeneration") == worker["metadata"]["generation"] for k in kinds)

    lab.wait_until(current, timeout=30, message="the conditions did not catch up with the new generation")
    owner = lab.get("deployment", "orders-worker", namespace=mode)["metadata"]["ownerReferences"][0]
    assert owner["uid"] == worker["metadata"]["uid"] and owner["controller"] is True
    operator.stop()


def test_broken_signal_stops_only_the_governor_loop(lab, ol) -> None:  # noqa: ANN001
    """Continues from the separate-mode state above: invoices' queue says "lots"."""
    operator = ol.start(lab, "separate", "separate")
    lab.wait_until(lambda: operator.reconciles().get(("governor", "error"), 0) >= 2, timeout=30)
    counts = operator.reconciles()
    assert counts.get(("composite", "error"), 0) == 0 and counts[("composite", "ok")] >= 2
    assert ol.condition_is(lab, "separate", "invoices", "Composed", "True")
    assert ol.conditions(lab, "separate", "invoices")["Governed"]["reason"] == "BadQueueSignal"
    assert lab.get("deployment", "invoices-worker", namespace="separate") is not None
    operator.stop()
