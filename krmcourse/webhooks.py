"""TLS material and AdmissionReview plumbing for the labs' admission webhooks.

Why this module exists: the API server calls an admission webhook only over HTTPS, and it trusts the
webhook only through the ``caBundle`` written into the webhook configuration. kopf's development mode
can self-sign, but it relies on oscrypto, which breaks on OpenSSL 3, so the labs make their own small
CA with ``cryptography``. Where the webhook listens depends on where the API server runs:
:func:`endpoint_for` asks the lab's provider (127.0.0.1 for the default provider, whose API server
is a process here; the container network's gateway on kind, whose API server runs in a container).

The AdmissionReview helpers are pure functions over dicts, so a lab's webhook server stays a thin
layer over whichever HTTP server it uses.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import json
import socket
import ssl
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from krmcourse.errors import KrmcourseError

ADMISSION_API_VERSION = "admission.k8s.io/v1"


class WebhookError(KrmcourseError):
    """A webhook could not be set up, or it received something that is not an AdmissionReview."""


@dataclass(frozen=True)
class TLSMaterial:
    """A CA and a serving certificate signed by it, as PEM files in one folder."""

    directory: Path
    ca_cert: Path
    cert: Path
    key: Path

    @property
    def ca_bundle(self) -> str:
        """The CA certificate base64-encoded, as a webhook configuration's ``caBundle`` wants it."""
        return base64.b64encode(self.ca_cert.read_bytes()).decode("ascii")

    def server_context(self) -> ssl.SSLContext:
        """An SSL context for the webhook's listening socket."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.cert, self.key)
        return context

    def client_context(self) -> ssl.SSLContext:
        """An SSL context that trusts only this CA: how a test talks to the webhook like the API server."""
        return ssl.create_default_context(cafile=str(self.ca_cert))


def _write(path: Path, data: bytes, private: bool = False) -> Path:
    path.write_bytes(data)
    path.chmod(0o600 if private else 0o644)
    return path


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def make_tls(
    directory: Path, hosts: Sequence[str] = ("127.0.0.1", "localhost"), days: int = 7
) -> TLSMaterial:
    """Create a fresh CA and a serving certificate for ``hosts`` in ``directory``.

    >>> tls = make_tls(Path("/tmp/enforcer-tls"))      # doctest: +SKIP
    >>> config["webhooks"][0]["clientConfig"]["caBundle"] = tls.ca_bundle  # doctest: +SKIP

    The API server checks the certificate's subject alternative names against the host in the
    webhook URL, so pass every host name or IP address the URL may use.
    """
    if not hosts:
        raise WebhookError("make_tls needs at least one host name or IP address for the certificate.")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o700)
    now = dt.datetime.now(dt.UTC)
    not_before, not_after = now - dt.timedelta(minutes=5), now + dt.timedelta(days=days)

    ca_key = _key()
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "krmcourse lab webhook CA")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                key_encipherment=False, data_encipherment=False, key_agreement=False,
                encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )

    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    server_key = _key()
    server_cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
        .issuer_name(ca_name)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    pem = serialization.Encoding.PEM
    key_format = serialization.PrivateFormat.PKCS8
    no_password = serialization.NoEncryption()
    return TLSMaterial(
        directory=directory,
        ca_cert=_write(directory / "ca.crt", ca_cert.public_bytes(pem)),
        cert=_write(directory / "tls.crt", server_cert.public_bytes(pem)),
        key=_write(
            directory / "tls.key", server_key.private_bytes(pem, key_format, no_password), private=True
        ),
    )


@dataclass(frozen=True)
class Endpoint:
    """Where one webhook served on this machine listens, and the certificate that names that address."""

    host: str
    port: int
    tls: TLSMaterial

    def url(self, path: str = "") -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"https://{host}:{self.port}{path}"


def endpoint_for(lab: Any, folder: Path) -> Endpoint:
    """An address the lab's API server can reach on this machine, a free port there, and TLS for it.

    ``lab`` is a :class:`krmcourse.Lab`; its provider knows the address (never 0.0.0.0).
    """
    host = lab.host_address
    return Endpoint(host, free_port(host), make_tls(folder, hosts=(host,)))


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on ``host`` right now (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_open(port: int, host: str = "127.0.0.1", timeout: float = 0.5) -> bool:
    """True when something accepts TCP connections on ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def wait_for_port(port: int, host: str = "127.0.0.1", timeout: float = 15.0) -> None:
    """Block until ``host:port`` accepts connections; WebhookError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if port_open(port, host):
            return
        time.sleep(0.1)
    raise WebhookError(
        f"Nothing is listening on {host}:{port} after {timeout:.0f}s.",
        hint="Look at the webhook process's logs(): it may have failed to load its certificate.",
    )


def parse_review(body: bytes) -> dict[str, Any]:
    """The ``request`` part of an AdmissionReview body; WebhookError if the body is not one."""
    try:
        review = json.loads(body)
    except ValueError as exc:
        raise WebhookError(f"The request body is not JSON: {exc}") from exc
    if not isinstance(review, dict) or review.get("kind") != "AdmissionReview":
        raise WebhookError("The request body is not an AdmissionReview.")
    if review.get("apiVersion") != ADMISSION_API_VERSION:
        raise WebhookError(
            f"AdmissionReview {review.get('apiVersion')!r} is not supported.",
            hint=f"List only {ADMISSION_API_VERSION.split('/')[1]} in admissionReviewVersions.",
        )
    request = review.get("request")
    if not isinstance(request, dict) or "uid" not in request:
        raise WebhookError("The AdmissionReview has no request with a uid.")
    return request


def admission_response(
    request: dict[str, Any],
    allowed: bool,
    message: str | None = None,
    patch: list[dict[str, Any]] | None = None,
    warnings: Sequence[str] = (),
    code: int = 403,
) -> dict[str, Any]:
    """The AdmissionReview a webhook sends back for ``request``.

    A denial carries ``message``, which the API server shows to the client verbatim. A mutation is
    a JSONPatch (RFC 6902) list, sent base64-encoded; an empty patch is left out.
    """
    response: dict[str, Any] = {"uid": request["uid"], "allowed": allowed}
    if not allowed:
        response["status"] = {"code": code, "message": message or "denied by the webhook"}
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode("ascii")
    if warnings:
        response["warnings"] = list(warnings)
    return {"apiVersion": ADMISSION_API_VERSION, "kind": "AdmissionReview", "response": response}
