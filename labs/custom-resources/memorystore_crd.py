"""Change the MemoryStore CRD one feature at a time, and ask the real API server what it accepts.

The custom-resources notebook and its exercise checks use these helpers so that a cell shows one
idea: "send this object, read what the API server said". Every probe is a real request; creates and
patches run with ``--dry-run=server`` unless told otherwise, so they pass through decoding, defaulting,
schema validation and CEL rules without storing anything.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from krmcourse import Lab
from krmcourse import kubectl as kubectl_cli

CRD = "memorystores.store.krmcourse.dev"
GROUP = "store.krmcourse.dev"
NAMESPACE = "store"


@dataclass(frozen=True)
class Verdict:
    """What the API server answered: accepted or not, its message (or warnings), and the object."""

    allowed: bool
    message: str
    object: dict[str, Any] | None = None

    def __str__(self) -> str:
        return ("ACCEPTED" if self.allowed else "REFUSED") + (f": {self.message}" if self.message else "")


def memory_store(name: str, namespace: str = NAMESPACE, version: str = "v1", **spec: Any) -> dict[str, Any]:
    """A MemoryStore manifest; keyword arguments become its spec."""
    return {
        "apiVersion": f"{GROUP}/{version}",
        "kind": "MemoryStore",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def run_kubectl(lab: Lab, *args: str, input: str | None = None) -> Verdict:
    """Run kubectl and keep both streams: refusals and warnings both arrive on stderr."""
    done = kubectl_cli.run(lab.kubeconfig, list(args), input=input, check=False)
    message = done.stderr.strip()
    obj = None
    if done.returncode == 0 and done.stdout.lstrip().startswith("{"):
        obj = json.loads(done.stdout)
    return Verdict(done.returncode == 0, message, obj)


def try_create(lab: Lab, obj: dict[str, Any], dry_run: bool = True, validate: str = "strict") -> Verdict:
    """Create ``obj`` (by default only as a server-side dry run) and report the API server's answer."""
    args = ["create", "-f", "-", "-o", "json", f"--validate={validate}"]
    if dry_run:
        args.append("--dry-run=server")
    return run_kubectl(lab, *args, input=json.dumps(obj))


def try_patch(
    lab: Lab,
    name: str,
    patch: dict[str, Any],
    *,
    subresource: str | None = None,
    dry_run: bool = True,
    resource: str = "memorystores",
    namespace: str = NAMESPACE,
) -> Verdict:
    """Merge-patch one MemoryStore (or its ``status``/``scale`` subresource) and report the answer."""
    args = ["patch", resource, name, "-n", namespace, "--type=merge", "-p", json.dumps(patch), "-o", "json"]
    if subresource:
        args.append(f"--subresource={subresource}")
    if dry_run:
        args.append("--dry-run=server")
    return run_kubectl(lab, *args)


def crd(lab: Lab) -> dict[str, Any]:
    found = lab.get("crd", CRD)
    assert found is not None, f"the CRD {CRD} is not there: is the lab up?"
    return found


def version_index(lab: Lab, version: str) -> int:
    """Position of ``version`` in the CRD's version list; a clear error names the ones that exist."""
    names = [v["name"] for v in crd(lab)["spec"]["versions"]]
    if version not in names:
        raise ValueError(f"The MemoryStore CRD has no version {version!r}; it has {', '.join(names)}.")
    return names.index(version)


def patch_crd(lab: Lab, ops: list[dict[str, Any]]) -> None:
    """Apply a JSON patch to the CRD, so that only the named parts change and nothing else is lost."""
    lab.kubectl("patch", "crd", CRD, "--type=json", "-p", json.dumps(ops))


def for_every_version(
    lab: Lab, make_op: Callable[[int, dict[str, Any]], dict[str, Any]]
) -> list[dict[str, Any]]:
    """One JSON-patch op per served version, so a rule added after a second version exists covers both."""
    return [make_op(i, v) for i, v in enumerate(crd(lab)["spec"]["versions"])]


def spec_schema_path(index: int, *fields: str) -> str:
    """JSON-patch path of a field under ``spec`` in the schema of version number ``index``."""
    path = f"/spec/versions/{index}/schema/openAPIV3Schema/properties/spec"
    for name in fields:
        path += f"/properties/{name}"
    return path


def settle(lab: Lab, probe: Callable[[], bool], what: str, timeout: float = 30) -> None:
    """Wait until the API server serves the changed CRD: it rebuilds its handlers in the background."""
    lab.wait_until(probe, timeout=timeout, interval=0.2, message=f"the API server did not pick up {what}")


#: Where a MemoryStore keeps the three things an autoscaler needs: wanted copies, serving copies, its pods.
SCALE = {
    "specReplicasPath": ".spec.replicas",
    "statusReplicasPath": ".status.replicas",
    "labelSelectorPath": ".status.selector",
}


def scale_url(name: str, version: str = "v1", namespace: str = NAMESPACE) -> str:
    """The URL of one MemoryStore's ``/scale`` subresource."""
    return f"/apis/{GROUP}/{version}/namespaces/{namespace}/memorystores/{name}/scale"


def read_scale(lab: Lab, name: str, version: str = "v1") -> Verdict:
    """GET a MemoryStore's ``/scale``: an ``autoscaling/v1`` Scale, or the API server's refusal."""
    return run_kubectl(lab, "get", "--raw", scale_url(name, version))


def scale_matches(lab: Lab, name: str) -> bool:
    """Whether ``/scale`` reports the object's own spec.replicas and status.replicas (the paths are served)."""
    scale = read_scale(lab, name).object
    obj = lab.get(f"memorystores.{GROUP}", name, namespace=NAMESPACE)
    if scale is None or obj is None:
        return False
    return (scale["spec"].get("replicas", 0) == obj["spec"].get("replicas", 0)
            and scale.get("status", {}).get("replicas", 0) == (obj.get("status") or {}).get("replicas", 0))


def declare_scale(lab: Lab, scale: dict[str, str]) -> None:
    """Set the scale subresource of every version of the CRD to ``scale`` (its three paths)."""
    patch_crd(
        lab,
        for_every_version(
            lab, lambda i, _: {"op": "add", "path": f"/spec/versions/{i}/subresources/scale", "value": scale}
        ),
    )


def enable_scale(lab: Lab) -> None:
    """Declare the scale subresource on every version: spec.replicas, status.replicas, status.selector."""
    declare_scale(lab, SCALE)
    settle(lab, lambda: scale_matches(lab, "primary") and scale_matches(lab, "sessions"), "the scale subresource")


def add_storage_version(lab: Lab, new: str = "v2", old: str = "v1") -> None:
    """Serve ``new`` with the same schema as ``old``, make it the storage version, and deprecate ``old``.

    With no conversion webhook (strategy None) the API server converts by rewriting apiVersion only,
    which is right exactly when both versions share one schema.
    """
    index = version_index(lab, old)
    versions = crd(lab)["spec"]["versions"]
    if any(v["name"] == new for v in versions):
        return  # already done: running the cell twice changes nothing
    added = copy.deepcopy(versions[index]) | {"name": new, "storage": True}
    added.pop("deprecated", None)
    added.pop("deprecationWarning", None)
    patch_crd(
        lab,
        [
            {"op": "replace", "path": f"/spec/versions/{index}/storage", "value": False},
            {"op": "add", "path": f"/spec/versions/{index}/deprecated", "value": True},
            {
                "op": "add",
                "path": f"/spec/versions/{index}/deprecationWarning",
                "value": f"{GROUP}/{old} MemoryStore is deprecated; use {GROUP}/{new}",
            },
            {"op": "add", "path": "/spec/versions/-", "value": added},
        ],
    )
    settle(lab, lambda: preferred_version(lab) == new, f"version {new}")


def preferred_version(lab: Lab) -> str:
    """The version discovery recommends to clients: the highest-priority served version (v2 > v1 > v1beta1)."""
    group = json.loads(lab.kubectl("get", "--raw", f"/apis/{GROUP}"))
    return str(group["preferredVersion"]["version"])


def migrate_storage(lab: Lab, to: str = "v2") -> list[str]:
    """Rewrite every MemoryStore so etcd holds it in version ``to``, then record that only ``to`` is stored.

    A write with no change still makes the API server re-encode the object in the storage version:
    this is what the kube-storage-version-migrator does for a whole cluster.
    """
    items = lab.objects(f"memorystores.{to}.{GROUP}", all_namespaces=True)
    for item in items:
        lab.kubectl("replace", "-f", "-", input=json.dumps(item))
    lab.kubectl(
        "patch",
        "crd",
        CRD,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": {"storedVersions": [to]}}),
    )
    return [f"{i['metadata']['namespace']}/{i['metadata']['name']}" for i in items]


def set_names(lab: Lab, short_names: list[str], categories: list[str]) -> None:
    """Give the kind short names and categories, then wait until discovery lists them."""
    patch_crd(
        lab,
        [
            {"op": "add", "path": "/spec/names/shortNames", "value": short_names},
            {"op": "add", "path": "/spec/names/categories", "value": categories},
        ],
    )

    def listed() -> bool:
        resources = json.loads(lab.kubectl("get", "--raw", f"/apis/{GROUP}/{preferred_version(lab)}"))[
            "resources"
        ]
        served = next(r for r in resources if r["name"] == "memorystores")
        return served.get("shortNames") == short_names and served.get("categories") == categories

    settle(lab, listed, "the new names")


def printer_columns(lab: Lab) -> dict[str, list[str]]:
    """Version name -> the JSON paths of its additionalPrinterColumns."""
    return {
        v["name"]: [c["jsonPath"] for c in v.get("additionalPrinterColumns", [])]
        for v in crd(lab)["spec"]["versions"]
    }


def spec_fields(lab: Lab, version: str = "v1") -> list[dict[str, Any]]:
    """One row per field of ``spec`` in a version's schema: type and the constraints declared on it."""
    served = crd(lab)["spec"]["versions"][version_index(lab, version)]
    spec = served["schema"]["openAPIV3Schema"]["properties"]["spec"]
    rows = []
    for name, field in spec["properties"].items():
        rows.append({"field": name, "type": field.get("type"), "required": name in spec.get("required", []),
                     "enum": field.get("enum"), "default": field.get("default"), "format": field.get("format"),
                     "minimum": field.get("minimum"),
                     "rules": [r["rule"] for r in field.get("x-kubernetes-validations", [])] or None})
    rows.append({"field": "(spec itself)", "type": "object",
                 "rules": [r["rule"] for r in spec.get("x-kubernetes-validations", [])] or None})
    return rows
