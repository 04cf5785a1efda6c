"""The enforcer: a mutating admission webhook that copies CacheClass values into new Caches.

It listens with TLS where the lab's API server can call it (classlab picks the address) and
answers AdmissionReviews for CREATE of caches: the class named by the Cache, or the default class,
fills in className and every field the Cache left out. A Cache naming a class that does not exist
is refused, so a typo surfaces at `kubectl apply` time instead of as a silently default cache.

Run through classlab.start_enforcer(lab), which makes the certificate, starts this process and
registers the MutatingWebhookConfiguration.
"""

from __future__ import annotations

import argparse
import json
import logging
import ssl
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from classes import class_for, defaults_patch

from krmcourse.passloop import connect, log, raw
from krmcourse.webhooks import WebhookError, admission_response, parse_review

CLASSES = "cacheclasses.classes.krmcourse.dev"


def review(request: dict[str, Any], classes: list[dict[str, Any]]) -> dict[str, Any]:
    """Decide one AdmissionReview request: allow with a copy-the-defaults patch, or refuse."""
    cache = request.get("object") or {}
    name = f"{request.get('namespace')}/{cache.get('metadata', {}).get('name')}"
    cls = class_for(cache, classes)
    wanted = cache.get("spec", {}).get("className")
    if cls is None and wanted:
        log.info("refused Cache %s: CacheClass %s does not exist", name, wanted)
        return admission_response(request, False, f'CacheClass "{wanted}" does not exist', code=422)
    if cls is None:
        log.info("admitted Cache %s unchanged: no class named and no default class", name)
        return admission_response(request, True)
    patch = defaults_patch(cache, cls)
    log.info(
        "admitted Cache %s: copied %s from CacheClass %s",
        name,
        [op["path"].rsplit("/", 1)[-1] for op in patch],
        cls["metadata"]["name"],
    )
    return admission_response(request, True, patch=patch)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1", help="the address the API server calls (never 0.0.0.0)")
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s enforcer %(message)s", stream=sys.stdout)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    api = connect()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            try:
                request = parse_review(body)
                classes = [raw(c) for c in api.get(CLASSES)]  # read fresh: the class may just have changed
                answer, code = review(request, classes), 200
            except WebhookError as exc:
                answer, code = {"error": str(exc)}, 400
            data = json.dumps(answer).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - keep the log about decisions
            return

    server = ThreadingHTTPServer((args.host, args.port), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(args.cert, args.key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    log.info("listening on https://%s:%d", args.host, args.port)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
