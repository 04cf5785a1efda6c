"""A CRD conversion webhook for FancyDNS v1 <-> v2, served over TLS where the API server can call it.

v1 has two booleans, `enableTCP` and `enableUDP`; v2 replaces them with `protocol: UDP|TCP|All`.
The API server calls this webhook whenever it must hand out or store an object in a version other
than the one it has. Conversion must round-trip, because the same object is read in both versions.

Run: python fancydns_conversion_webhook.py --port 8443 --cert tls.crt --key tls.key
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import ssl
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: Its log, one whole line per record: requests are served on threads of their own, and print() from
#: two threads at once can run their lines together.
log = logging.getLogger("conversion-webhook")

GROUP = "dns.krmcourse.dev"


class ConversionError(ValueError):
    """An object that cannot be represented in the requested version."""


def to_v2(obj: dict[str, Any]) -> dict[str, Any]:
    """enableTCP/enableUDP -> protocol. Both false has no v2 meaning, so it is refused."""
    out = copy.deepcopy(obj)
    spec = out.setdefault("spec", {})
    tcp = spec.pop("enableTCP", True)
    udp = spec.pop("enableUDP", True)
    if tcp and udp:
        spec["protocol"] = "All"
    elif tcp:
        spec["protocol"] = "TCP"
    elif udp:
        spec["protocol"] = "UDP"
    else:
        raise ConversionError(f"{obj['metadata'].get('name')}: serves no protocol, which v2 cannot express")
    out["apiVersion"] = f"{GROUP}/v2"
    return out


def to_v1(obj: dict[str, Any]) -> dict[str, Any]:
    """protocol -> enableTCP/enableUDP."""
    out = copy.deepcopy(obj)
    spec = out.setdefault("spec", {})
    protocol = spec.pop("protocol", "All")
    spec["enableTCP"] = protocol in ("TCP", "All")
    spec["enableUDP"] = protocol in ("UDP", "All")
    out["apiVersion"] = f"{GROUP}/v1"
    return out


def convert(obj: dict[str, Any], desired: str) -> dict[str, Any]:
    """Convert one object to the desired apiVersion (a no-op when it is already there)."""
    if obj.get("apiVersion") == desired:
        return obj
    if desired == f"{GROUP}/v2":
        return to_v2(obj)
    if desired == f"{GROUP}/v1":
        return to_v1(obj)
    raise ConversionError(f"unknown apiVersion {desired}")


def review_response(review: dict[str, Any]) -> dict[str, Any]:
    """Answer a ConversionReview (apiextensions.k8s.io/v1)."""
    request = review.get("request", {})
    desired = request.get("desiredAPIVersion", "")
    response: dict[str, Any] = {"uid": request.get("uid", "")}
    try:
        response["convertedObjects"] = [convert(o, desired) for o in request.get("objects", [])]
        response["result"] = {"status": "Success"}
    except ConversionError as err:
        response["result"] = {"status": "Failure", "message": str(err)}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "response": response}


class Handler(BaseHTTPRequestHandler):
    """POST /convert with a ConversionReview; anything else is 404."""

    def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
        if self.path.split("?")[0] != "/convert":
            self.send_error(404)
            return
        length = int(self.headers.get("Content-Length", "0"))
        review = json.loads(self.rfile.read(length))
        answer = review_response(review)
        objects = review.get("request", {}).get("objects", [])
        sources = sorted({o.get("apiVersion", "?").split("/")[-1] for o in objects})
        target = review.get("request", {}).get("desiredAPIVersion", "?").split("/")[-1]
        log.info(f"converted {len(objects)} object(s) {','.join(sources) or '-'} -> {target}: "
                 f"{answer['response']['result']['status']}")
        body = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - keep the log to one line a call
        return


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1", help="the address the API server calls (never 0.0.0.0)")
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    args = parser.parse_args(argv)
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args.cert, args.key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(message)s")
    log.info(f"serving conversions on https://{args.host}:{args.port}/convert")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
