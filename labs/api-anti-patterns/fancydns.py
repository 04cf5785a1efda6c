"""Ask the lab's API server what it thinks of FancyDNS objects.

Every function here sends a real request and reports the server's answer, so the notebook can show
what the API server accepts, rejects, versions and documents, instead of stating it in prose. Dry-run
requests (`--dry-run=server`) go through defaulting, validation and admission but store nothing.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import yaml

from krmcourse import KubectlError, Lab

GROUP = "dns.krmcourse.dev"
CRD_NAME = f"fancydnses.{GROUP}"
NAMESPACE = "dns"
ANNOTATION = f"{GROUP}/query-logging"
_BOILERPLATE = re.compile(r'^(error: )?(Error from server( \(\w+\))?: )?(error when \w+ "STDIN": )?')


@dataclass(frozen=True)
class Verdict:
    """What the API server said about one request."""

    accepted: bool
    message: str
    object: dict[str, Any] | None = None

    def __str__(self) -> str:
        return ("accepted" if self.accepted else "REJECTED") + (f": {self.message}" if self.message else "")


def fancydns(
    name: str,
    zone: str,
    version: str = "v1",
    annotations: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """Build a FancyDNS manifest; extra keyword arguments become spec fields, misspellings included."""
    metadata: dict[str, Any] = {"name": name, "namespace": NAMESPACE}
    if annotations:
        metadata["annotations"] = annotations
    return {
        "apiVersion": f"{GROUP}/{version}",
        "kind": "FancyDNS",
        "metadata": metadata,
        "spec": {"zone": zone, **spec},
    }


def dry_run(lab: Lab, manifest: dict[str, Any], validate: str = "strict") -> Verdict:
    """Send a create with `--dry-run=server` and report the server's verdict.

    `validate="strict"` asks the server to reject unknown fields (what kubectl does by default);
    `"warn"` only warns and the server then prunes the unknown field silently.
    """
    try:
        out = lab.kubectl(
            "create",
            "--dry-run=server",
            f"--validate={validate}",
            "-o",
            "json",
            "-f",
            "-",
            input=yaml.safe_dump(manifest),
        )
    except KubectlError as err:
        return Verdict(False, _server_message(err.stderr))
    return Verdict(True, "", json.loads(out))


def _server_message(stderr: str) -> str:
    """Keep the server's own words and drop kubectl's boilerplate around them."""
    text = " ".join(line.strip() for line in stderr.strip().splitlines() if line.strip())
    return _BOILERPLATE.sub("", text)


def generation(lab: Lab, name: str) -> int:
    """metadata.generation: the counter that moves only when the spec changes."""
    obj = lab.get(f"fancydnses.{GROUP}", name, namespace=NAMESPACE)
    if obj is None:
        raise LookupError(f"There is no FancyDNS {NAMESPACE}/{name}; did the lab come up?")
    return int(obj["metadata"]["generation"])


def annotate(lab: Lab, name: str, key: str, value: str) -> dict[str, Any]:
    """Set an annotation and return the object as stored, to see what the server kept."""
    lab.kubectl("annotate", "--overwrite", "-n", NAMESPACE, f"fancydnses.{GROUP}", name, f"{key}={value}")
    obj = lab.get(f"fancydnses.{GROUP}", name, namespace=NAMESPACE)
    assert obj is not None
    return obj


def set_spec(lab: Lab, name: str, **spec: Any) -> Verdict:
    """Change spec fields with a full update and strict field validation, and report the verdict.

    Strict is what `kubectl apply`, `create` and `replace` ask for. A client that does not ask gets
    only a warning, and the server drops the unknown field: not stored either way.
    """
    obj = lab.get(f"fancydnses.{GROUP}", name, namespace=NAMESPACE)
    if obj is None:
        raise LookupError(f"There is no FancyDNS {NAMESPACE}/{name}; did the lab come up?")
    obj["spec"].update(spec)
    try:
        out = lab.kubectl("replace", "--validate=strict", "-o", "json", "-f", "-", input=json.dumps(obj))
    except KubectlError as err:
        return Verdict(False, _server_message(err.stderr))
    return Verdict(True, "", json.loads(out))


def explain(lab: Lab, field: str) -> str:
    """`kubectl explain` reads the published OpenAPI schema: what a user can discover.

    The API server republishes a CRD's schema a moment after the CRD changes, so a field that was
    just added is waited for (up to 30 s) rather than reported missing.
    """
    args = ("explain", f"fancydnses.{GROUP}.{field}")
    lab.wait_until(lambda: "does not exist" not in lab.kubectl(*args, check=False), timeout=30, interval=0.5,
                   message=f"kubectl explain never found {field}")
    return lab.kubectl(*args)


def condition(lab: Lab, name: str, ctype: str) -> dict[str, Any] | None:
    """One condition from the object's status, or None when the operator has not written it."""
    obj = lab.get(f"fancydnses.{GROUP}", name, namespace=NAMESPACE) or {}
    for cond in obj.get("status", {}).get("conditions", []):
        if cond.get("type") == ctype:
            return cond
    return None


def protocol_matrix(lab: Lab) -> list[dict[str, Any]]:
    """Try all four combinations of the two booleans against the real server (dry-run)."""
    rows = []
    for tcp in (True, False):
        for udp in (True, False):
            verdict = dry_run(lab, fancydns("matrix", "m.example", enableTCP=tcp, enableUDP=udp))
            rows.append(
                {
                    "enableTCP": tcp,
                    "enableUDP": udp,
                    "accepted": verdict.accepted,
                    "server says": verdict.message or "created (dry run)",
                }
            )
    return rows
