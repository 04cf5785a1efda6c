"""What the governor lab promises beyond its exercises: the governor converges after a SIGKILL in the
middle of its work, it cannot write to the Deployment itself, and detaching leaves the target alone."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from krmcourse import KubectlError, kubectl
from krmcourse.labcode import lab_module

LAB_NAME = "governor"  # the lab fixture (conftest) brings it up for this module

ROOT = Path(__file__).resolve().parent.parent


def test_desired_replicas_is_clamped() -> None:
    governor = lab_module("governor", "controllers.governor")
    limits = {"itemsPerReplica": 5, "minReplicas": 1, "maxReplicas": 8}
    assert [governor.desired_replicas(n, limits) for n in (0, 1, 5, 6, 18, 1000)] == [1, 1, 1, 2, 4, 8]


@pytest.fixture(scope="module")
def gov(lab) -> ModuleType:  # noqa: ANN001
    return lab.support("governor_support")


def _status(lab) -> dict:  # noqa: ANN001
    return lab.get("queuescaler.autoscaling.krmcourse.dev", "worker", namespace="shop").get("status") or {}


def _governor_lists(lab, gov) -> int:  # noqa: ANN001
    """How many times the governor has listed QueueScalers, by the API server's own audit log."""
    user = f"system:serviceaccount:{gov.NAMESPACE}:{gov.SERVICE_ACCOUNT}"
    count = 0
    with open(lab.audit_log) as log:
        for line in log:
            if user not in line or "queuescalers" not in line:
                continue  # most lines are someone else's: skip them without parsing
            try:
                event = json.loads(line)
            except ValueError:
                continue  # the API server may be half-way through writing the last line
            count += (event.get("verb") == "list" and event.get("objectRef", {}).get("resource") == "queuescalers"
                      and event.get("user", {}).get("username") == user)
    return count


@pytest.mark.cluster
def test_governor_converges_after_sigkill_mid_work(lab, gov) -> None:  # noqa: ANN001
    assert gov.deploy(lab).ok
    governor = gov.start(lab)
    lab.apply(lab.path / "deployer" / "orders-scaler.yaml")
    lab.wait_until(lambda: gov.replicas(lab, "worker") == 1, timeout=20)
    # The signal jumps, and the governor dies as it starts to act on it.
    gov.set_queue(lab, "orders-queue", 18)
    lab.wait_until(lambda: "1 -> 4" in governor.logs(), timeout=20, interval=0.05)
    governor.kill()
    assert not governor.alive
    # While it is dead, the signal moves again and nothing follows it.
    gov.set_queue(lab, "orders-queue", 33)
    for _ in range(3):
        assert gov.replicas(lab, "worker") == 4
    governor.restart()
    lab.wait_until(lambda: gov.replicas(lab, "worker") == 7, timeout=30, message="worker did not reach 7")
    lab.wait_until(lambda: _status(lab).get("desiredReplicas") == 7, timeout=10)
    assert _status(lab)["queueLength"] == 33
    governor.stop()


@pytest.mark.cluster
def test_governor_identity_cannot_write_the_deployment(lab, gov) -> None:  # noqa: ANN001
    kubeconfig = lab.kubeconfig_for(gov.SERVICE_ACCOUNT, gov.NAMESPACE)

    def as_governor(*args: str) -> None:
        kubectl.run(kubeconfig, list(args))

    patch = json.dumps({"spec": {"template": {"metadata": {"labels": {"hacked": "yes"}}}}})
    with pytest.raises(KubectlError, match="forbidden"):
        as_governor("patch", "deployment", "worker", "-n", "shop", "--type=merge", "-p", patch)
    with pytest.raises(KubectlError, match="forbidden"):
        as_governor("delete", "deployment", "worker", "-n", "shop")
    as_governor("patch", "deployment", "worker", "-n", "shop", "--subresource=scale", "--type=merge",
                "-p", json.dumps({"spec": {"replicas": 5}}))
    assert gov.replicas(lab, "worker") == 5


@pytest.mark.cluster
def test_detaching_leaves_the_target_at_its_last_size(lab, gov) -> None:  # noqa: ANN001
    governor = gov.start(lab)
    lab.apply(lab.path / "deployer" / "orders-scaler.yaml")
    gov.set_queue(lab, "orders-queue", 12)
    lab.wait_until(lambda: gov.replicas(lab, "worker") == 3, timeout=20)
    lab.delete("queuescaler.autoscaling.krmcourse.dev", "worker", namespace="shop")
    gov.set_queue(lab, "orders-queue", 40)
    # Every pass starts with a list of QueueScalers. Three more lists mean at least one whole pass ran
    # after the signal moved: had the governor still been attached, it would have scaled by now.
    seen = _governor_lists(lab, gov)
    lab.wait_until(lambda: _governor_lists(lab, gov) >= seen + 3, timeout=30,
                   message="the governor made no passes after the signal moved")
    assert gov.replicas(lab, "worker") == 3
    assert lab.get("deployment", "worker", namespace="shop") is not None
    governor.stop()
