"""What the enforcer lab promises beyond its exercises: TLS material the API server trusts, a webhook
that keeps enforcing through a crash (no pod slips through while it is dead), and a read-only identity."""

from __future__ import annotations

import base64
import ipaddress
import json
from pathlib import Path
from types import ModuleType

import pytest
from cryptography import x509

from krmcourse.labcode import lab_module
from krmcourse.webhooks import WebhookError, admission_response, make_tls, parse_review

pytestmark = pytest.mark.every_provider

LAB_NAME = "enforcer"  # the lab fixture (conftest) brings it up for this module

ROOT = Path(__file__).resolve().parent.parent
LAB = ROOT / "labs" / "enforcer"


# ---------------------------------------------------------------- no cluster needed
def test_tls_material_is_a_ca_and_a_server_cert_for_the_hosts(tmp_path: Path) -> None:
    tls = make_tls(tmp_path / "tls", hosts=["127.0.0.1", "localhost"])
    ca = x509.load_pem_x509_certificate(tls.ca_cert.read_bytes())
    cert = x509.load_pem_x509_certificate(tls.cert.read_bytes())
    cert.verify_directly_issued_by(ca)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("127.0.0.1") in sans.get_values_for_type(x509.IPAddress)
    assert "localhost" in sans.get_values_for_type(x509.DNSName)
    assert base64.b64decode(tls.ca_bundle) == tls.ca_cert.read_bytes()
    assert tls.key.stat().st_mode & 0o077 == 0
    tls.server_context()  # the key matches the certificate


def test_make_tls_needs_a_host(tmp_path: Path) -> None:
    with pytest.raises(WebhookError, match="at least one host"):
        make_tls(tmp_path, hosts=[])


def test_admission_response_shapes() -> None:
    request = {"uid": "u1"}
    denied = admission_response(request, False, "no")["response"]
    assert denied == {"uid": "u1", "allowed": False, "status": {"code": 403, "message": "no"}}
    patch = [{"op": "add", "path": "/x", "value": 1}]
    mutated = admission_response(request, True, patch=patch)["response"]
    assert mutated["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(mutated["patch"])) == patch
    assert "patch" not in admission_response(request, True, patch=[])["response"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"not json", "not JSON"),
        (b'{"kind": "Pod"}', "not an AdmissionReview"),
        (b'{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1beta1"}', "not supported"),
        (b'{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": {}}', "uid"),
    ],
)
def test_parse_review_rejects_bad_bodies(body: bytes, message: str) -> None:
    with pytest.raises(WebhookError, match=message):
        parse_review(body)


def test_sidecar_patch_is_idempotent_and_labels_are_checked() -> None:
    webhook = lab_module("enforcer", "controllers.enforcer")
    spec = {"sidecar": {"name": "log", "image": "l:1"}, "requiredLabels": ["team"]}
    policy = {"metadata": {"name": "p"}, "spec": spec}
    pod = {"metadata": {}, "spec": {"containers": [{"name": "app", "image": "a:1"}]}}
    ops = webhook.sidecar_patch(pod, [policy])
    assert [op["path"] for op in ops] == ["/spec/containers/-", "/metadata/annotations",
                                          "/metadata/annotations/policy.krmcourse.dev~1injected-by"]
    already = {"metadata": {}, "spec": {"containers": [{"name": "app"}, {"name": "log"}]}}
    assert webhook.sidecar_patch(already, [policy]) == []
    assert webhook.missing_labels(pod, [policy]) == {"p": ["team"]}
    assert webhook.missing_labels({"metadata": {"labels": {"team": "x"}}}, [policy]) == {}


# ---------------------------------------------------------------- against a real cluster
@pytest.fixture(scope="module")
def enf(lab) -> ModuleType:  # noqa: ANN001
    return lab.support("enforcer_support")


@pytest.mark.cluster
def test_no_pod_slips_through_while_the_webhook_is_killed(lab, enf) -> None:  # noqa: ANN001
    """SIGKILL the webhook in the middle of a stream of creates, then restart it: with failurePolicy Fail,
    every pod the API server stored went through the webhook (it has the sidecar), and the enforcer
    serves again after the restart with nothing to recover."""
    enforcer = enf.start(lab)
    lab.apply(lab.path / "policies" / "payments-sidecars.yaml")
    outcomes = []
    for i in range(8):
        if i == 3:
            enforcer.process.kill()
            assert not enforcer.process.alive
        if i == 6:
            enforcer.process.restart()
            enforcer.process.wait_for_log("serving on")
        result = enf.create(lab, enf.pod(f"stream-{i}", "payments", team="payments"), dry_run=False)
        outcomes.append(result)
    assert [r.allowed for r in outcomes] == [True] * 3 + [False] * 3 + [True] * 2
    assert all("failed calling webhook" in r.message for r in outcomes[3:6])
    stored = enf.containers_by_pod(lab, "payments", "team=payments")
    assert sorted(stored) == [f"stream-{i}" for i in (0, 1, 2, 6, 7)]
    assert all(names == ["app", "log-shipper"] for names in stored.values())
    enforcer.stop()


@pytest.mark.cluster
def test_enforcer_identity_can_only_read_its_configuration(lab, enf) -> None:  # noqa: ANN001
    subject = f"--as=system:serviceaccount:{enf.NAMESPACE}:{enf.SERVICE_ACCOUNT}"

    def can(verb: str, resource: str) -> bool:
        return lab.kubectl("auth", "can-i", verb, resource, "-A", subject, check=False).strip() == "yes"

    assert can("list", "sidecarpolicies.policy.krmcourse.dev")
    assert not can("patch", "sidecarpolicies.policy.krmcourse.dev")
    assert not can("create", "pods")
    assert not can("list", "secrets")


@pytest.mark.cluster
def test_webhook_scope_spares_namespaces_that_did_not_opt_in(lab, enf) -> None:  # noqa: ANN001
    """With the webhook registered but nothing listening, only opted-in namespaces are blocked."""
    lab.apply(enf.webhook_configurations("https://127.0.0.1:9", "", "Fail"))  # port 9: nothing listens
    assert not enf.create(lab, enf.pod("x", "billing", team="t")).allowed
    assert enf.create(lab, enf.pod("x", "shop")).allowed
    assert enf.create(lab, enf.pod("x", "kube-system")).allowed
