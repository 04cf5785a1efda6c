"""The api-anti-patterns lab: conversion, the feature-gated operator, and the server's limits.

The conversion and the operator's decisions are tested on their own first. The cluster tests then
check, against a real lab cluster, that the webhook converts both ways through the API server (and
that reads fail when it is down), that the operator converges after SIGKILL and runs with only the
rights it needs, and that the size limits are the server's own.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from krmcourse import KubectlError, Lab
from krmcourse.labcode import lab_module

pytestmark = pytest.mark.every_provider

LAB_PATH = Path(__file__).resolve().parent.parent / "labs" / "api-anti-patterns"
dl, fd, conv = (lab_module("api-anti-patterns", m) for m in ("datastore_limits", "fancydns", "fancydns_conversion"))


def _script(name: str) -> ModuleType:
    return lab_module("api-anti-patterns", f"controllers.{name}")


webhook_code = _script("fancydns_conversion_webhook")
operator_code = _script("fancydns_operator")


def _v1(name: str, tcp: bool, udp: bool) -> dict:
    return {"apiVersion": "dns.krmcourse.dev/v1", "kind": "FancyDNS", "metadata": {"name": name},
            "spec": {"zone": "z.example", "enableTCP": tcp, "enableUDP": udp}}


# ----------------------------------------------------------------------------- without a cluster


@pytest.mark.parametrize(("tcp", "udp", "protocol"), [(True, True, "All"), (True, False, "TCP"), (False, True, "UDP")])
def test_conversion_round_trips(tcp: bool, udp: bool, protocol: str) -> None:
    v2 = webhook_code.to_v2(_v1("x", tcp, udp))
    assert v2["apiVersion"] == "dns.krmcourse.dev/v2" and v2["spec"]["protocol"] == protocol
    assert "enableTCP" not in v2["spec"]
    assert webhook_code.to_v1(v2) == _v1("x", tcp, udp)


def test_conversion_refuses_what_v2_cannot_say() -> None:
    review = {"request": {"uid": "u-1", "desiredAPIVersion": "dns.krmcourse.dev/v2",
                          "objects": [_v1("nothing", False, False)]}}
    answer = webhook_code.review_response(review)["response"]
    assert answer["uid"] == "u-1" and answer["result"]["status"] == "Failure"
    assert "serves no protocol" in answer["result"]["message"]


def test_the_site_recorder_keeps_serving_when_the_api_server_does_not_answer() -> None:
    """A status write that gets no answer (an API server restarting) saves nothing, and the next batch
    starts a transaction of its own rather than failing inside the one left open."""
    import httpx

    recorder_code = _script("site_recorder")
    answering = {"now": False}

    def api(request: httpx.Request) -> httpx.Response:
        if not answering["now"]:
            raise httpx.ConnectError("connection refused", request=request)
        return httpx.Response(200, json={"metadata": {"name": "harbour"}, "status": {"received": 1}})

    recorder = recorder_code.Recorder.__new__(recorder_code.Recorder)
    recorder.http, recorder.url = httpx.Client(base_url="http://api", transport=httpx.MockTransport(api)), "/site"
    recorder.site, recorder.archive = {"metadata": {"name": "harbour"}}, recorder_code.Archive()

    def record(status: dict, readings: list, archive: object) -> dict:
        archive.save(readings)
        return {"received": len(readings)}

    recorder.record = record
    reading = [{"device": "d1", "seq": 1, "at": "t"}]
    for _ in range(2):
        code, said = recorder.handle(reading)
        assert code == 503 and "did not answer" in said["message"], said
    assert recorder.archive.count() == 0
    answering["now"] = True
    assert recorder.handle(reading)[0] == 200 and recorder.archive.count() == 1


def test_operator_gates_and_conditions() -> None:
    assert operator_code.parse_gates("") == {"QueryLogging": False}
    assert operator_code.parse_gates("QueryLogging=true") == {"QueryLogging": True}
    with pytest.raises(SystemExit, match="known gates"):
        operator_code.parse_gates("QueryLoging=true")
    obj = {"metadata": {"generation": 3}, "spec": {"zone": "z", "queryLogging": "Enabled"}}
    off = {c["type"]: c for c in operator_code.desired_conditions(obj, {"QueryLogging": False})}
    on = {c["type"]: c for c in operator_code.desired_conditions(obj, {"QueryLogging": True})}
    assert off["QueryLogging"]["reason"] == "FeatureGateDisabled" and on["QueryLogging"]["status"] == "True"
    assert on["QueryLogging"]["observedGeneration"] == 3


# ----------------------------------------------------------------------------- against a cluster


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    lab = Lab("api-anti-patterns").reset(at="reject-both-false")  # fresh: a notebook may have left it up
    yield lab
    lab.down()


@pytest.mark.cluster
def test_operator_converges_after_sigkill_with_least_privilege(lab: Lab) -> None:
    identity = lab.kubeconfig_for("fancydns-operator", "krm-system")
    script = LAB_PATH / "controllers" / "fancydns_operator.py"
    operator = lab.run_controller(script, "--namespace", "dns", "--feature-gates", "QueryLogging=true",
                                  kubeconfig=identity, name="operator-test")
    try:
        lab.wait_until(lambda: fd.condition(lab, "iot", "QueryLogging"), timeout=60)
        operator.kill()
        assert fd.set_spec(lab, "iot", queryLogging="Enabled").accepted  # changed while nobody watches
        operator.restart()

        def honoured() -> bool:
            cond = fd.condition(lab, "iot", "QueryLogging") or {}
            return cond.get("status") == "True" and cond.get("observedGeneration") == fd.generation(lab, "iot")

        lab.wait_until(honoured, timeout=60, message="the restarted operator did not catch up")
    finally:
        operator.stop()
    operator, resource = "krm-system/fancydns-operator", "fancydnses.dns.krmcourse.dev"
    assert lab.can_i(operator, "patch", resource, namespace="dns", subresource="status")
    for verb in ("update", "delete"):
        assert not lab.can_i(operator, verb, resource, namespace="dns")


@pytest.mark.cluster
def test_webhook_converts_both_ways_and_reads_fail_without_it(lab: Lab) -> None:
    webhook = conv.start_webhook(lab)
    conv.install_v2(lab, webhook)
    lab.apply({**_v1("tcp-only", True, False), "metadata": {"name": "tcp-only", "namespace": "dns"}})
    lab.apply({"apiVersion": "dns.krmcourse.dev/v2", "kind": "FancyDNS",
               "metadata": {"name": "udp-only", "namespace": "dns"}, "spec": {"zone": "u.example", "protocol": "UDP"}})
    as_v1 = {o["metadata"]["name"]: o["spec"] for o in conv.read_as(lab, "v1")}
    as_v2 = {o["metadata"]["name"]: o["spec"] for o in conv.read_as(lab, "v2")}
    assert as_v2["tcp-only"]["protocol"] == "TCP"
    assert (as_v1["udp-only"]["enableTCP"], as_v1["udp-only"]["enableUDP"]) == (False, True)
    assert "converted" in webhook.process.logs()
    webhook.process.stop()
    with pytest.raises(KubectlError, match="conversion webhook"):  # a GET reaches the webhook every time
        lab.kubectl("get", "fancydnses.v1.dns.krmcourse.dev", "udp-only", "-n", "dns")


@pytest.mark.cluster
def test_size_limits_are_the_servers_own(lab: Lab) -> None:
    rows = dl.size_limits(lab)
    assert [r["accepted"] for r in rows] == [True, False, True, False, True, False]
    assert "request is too large" in rows[-1]["server says"]
    assert lab.get("device.inventory.krmcourse.dev", "firmware-1400k", namespace="inventory") is None
