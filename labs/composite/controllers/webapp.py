"""The Composite: each WebApp controls a ConfigMap, a Deployment, a Service and, if asked, a Bucket.

Run it with ``lab.run_kopf(...)``. Every child carries a controller ownerReference to its WebApp, so
the garbage collector deletes the children when the WebApp goes, and nothing here has to.

- Children are written with server-side apply under one field manager, so a reconcile creates or
  updates a child with the same call, and fields that other actors set are left alone.
- A child whose name is taken is only adopted with consent: it has no controller yet and carries the
  label ``app.kubernetes.io/part-of: <webapp>``. Otherwise the WebApp reports the clash in status.
- Changes to a child (someone deletes the Service, the Deployment becomes available, the Bucket
  becomes ready) wake the owner's reconcile through watches on the child kinds.
- Each child is written on the condition that it is as the reconcile read it (its resourceVersion),
  and only after a last look at the owner: a reconcile under way cannot undo a delete with
  ``--cascade=orphan`` that lands in the middle of it.
- The Bucket is the intermediate step: the WebApp creates a provisioner-style resource and reads its
  status; the provisioner, a separate controller, talks to the cloud.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections import defaultdict
from typing import Any

import kopf
import kubernetes
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ConflictError, NotFoundError

from krmcourse.conditions import ready_condition

GROUP, VERSION, PLURAL = "web.krmcourse.dev", "v1alpha1", "webapps"
MANAGER = "webapp-controller"
PART_OF = "app.kubernetes.io/part-of"
MANAGED_BY = "app.kubernetes.io/managed-by"
KINDS = {
    "ConfigMap": "v1",
    "Service": "v1",
    "Deployment": "apps/v1",
    "Bucket": "storage.krmcourse.dev/v1alpha1",
}

_client: DynamicClient | None = None
RETRY_SECONDS = 2.0
_locks: defaultdict[tuple[str, str], threading.Lock] = defaultdict(threading.Lock)


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=GROUP)
    settings.posting.level = logging.WARNING
    settings.watching.server_timeout = 60
    # A handler that fails (the API server was busy, a child vanished mid-reconcile) runs again in a
    # few seconds, not kopf's default minute: a reconcile is safe to repeat.
    settings.execution.default_backoff = RETRY_SECONDS
    logging.getLogger("httpx").setLevel(logging.WARNING)


def api(kind: str) -> Any:
    """The dynamic client's handle for one kind (discovery runs once, on first use)."""
    global _client
    if _client is None:
        _client = DynamicClient(kubernetes.config.new_client_from_config())
    return _client.resources.get(api_version=KINDS.get(kind, f"{GROUP}/{VERSION}"), kind=kind)


def get(kind: str, name: str, namespace: str) -> Any | None:
    try:
        return api(kind).get(name=name, namespace=namespace).to_dict()
    except NotFoundError:
        return None


def desired(app: dict[str, Any], bucket_url: str) -> list[dict[str, Any]]:
    """Every child this WebApp should have, in full. The only place that decides what a WebApp means."""
    meta, spec = app["metadata"], app["spec"]
    name, ns = meta["name"], meta["namespace"]
    owner = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "WebApp",
        "name": name,
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    selector = {"app.kubernetes.io/name": "webapp", "app.kubernetes.io/instance": name}
    labels = {**selector, PART_OF: name, MANAGED_BY: MANAGER}

    def child(api_version: str, kind: str, child_name: str, body: dict[str, Any]) -> dict[str, Any]:
        return {
            "apiVersion": api_version,
            "kind": kind,
            **body,
            "metadata": {"name": child_name, "namespace": ns, "labels": labels, "ownerReferences": [owner]},
        }

    config = {"MESSAGE": spec["message"], "BUCKET_URL": bucket_url}
    pod: dict[str, Any] = {
        "containers": [
            {
                "name": "web",
                "image": spec["image"],
                "ports": [{"name": "http", "containerPort": spec["port"]}],
                "envFrom": [{"configMapRef": {"name": f"{name}-config"}}],
                "resources": {
                    "requests": {"cpu": spec["resources"]["cpu"], "memory": spec["resources"]["memory"]}
                },
            }
        ]
    }
    if spec.get("nodeSelector"):
        pod["nodeSelector"] = dict(spec["nodeSelector"])
    config_hash = hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:12]
    children = [
        child("v1", "ConfigMap", f"{name}-config", {"data": config}),
        child(
            "apps/v1",
            "Deployment",
            name,
            {
                "spec": {
                    "replicas": spec["replicas"],
                    "selector": {"matchLabels": selector},
                    "template": {
                        "metadata": {
                            "labels": selector,
                            "annotations": {f"{GROUP}/config-hash": config_hash},
                        },
                        "spec": pod,
                    },
                }
            },
        ),
        child(
            "v1",
            "Service",
            name,
            {
                "spec": {
                    "selector": selector,
                    "ports": [{"name": "http", "port": 80, "targetPort": spec["port"]}],
                }
            },
        ),
    ]
    if spec["bucket"]["enabled"]:
        children.append(
            child(
                KINDS["Bucket"],
                "Bucket",
                f"{name}-assets",
                {"spec": {"storageClass": spec["bucket"]["storageClass"]}},
            )
        )
    return children


def claim(app: dict[str, Any], body: dict[str, Any], existing: dict[str, Any] | None,
          logger: logging.Logger) -> str:
    """Apply one child unless someone else has it. Returns a problem for status, or "" when applied.

    ``existing`` is the child as read before the owner was read the last time; the apply is made on the
    condition that the child has not changed since (its resourceVersion), and raises ConflictError if it has.
    """
    kind, name, ns = body["kind"], body["metadata"]["name"], body["metadata"]["namespace"]
    if existing is not None:
        refs = existing["metadata"].get("ownerReferences") or []
        ctrl = next((r for r in refs if r.get("controller")), None)
        if ctrl is not None and ctrl["uid"] != app["metadata"]["uid"]:
            return f"{kind} {name} is controlled by {ctrl['kind']} {ctrl['name']}"
        if ctrl is None:
            if (existing["metadata"].get("labels") or {}).get(PART_OF) != app["metadata"]["name"]:
                return (
                    f"{kind} {name} already exists and is not part of this WebApp; label it "
                    f"{PART_OF}={app['metadata']['name']} to hand it over, or delete it"
                )
            logger.info(f"adopting {kind} {name}")
            if kind == "Service":  # a selector is replaced, not merged: drop the keys we would not set
                extra = set(existing["spec"].get("selector") or {}) - set(body["spec"]["selector"])
                if extra:
                    existing = api(kind).patch(
                        name=name,
                        namespace=ns,
                        body={"metadata": {"resourceVersion": existing["metadata"]["resourceVersion"]},
                              "spec": {"selector": dict.fromkeys(extra)}},
                        content_type="application/merge-patch+json",
                    ).to_dict()
        body = {**body, "metadata": {**body["metadata"], "resourceVersion": existing["metadata"]["resourceVersion"]}}
    api(kind).server_side_apply(body=body, name=name, namespace=ns, field_manager=MANAGER, force_conflicts=True)
    return ""


def going(app: dict[str, Any] | None, now: dict[str, Any] | None) -> bool:
    """Whether the WebApp read as ``app`` is gone or being deleted, by ``now``, a later read of it."""
    return (
        app is None
        or now is None
        or now["metadata"]["uid"] != app["metadata"]["uid"]
        or bool(now["metadata"].get("deletionTimestamp"))
    )


def reconcile(namespace: str, name: str, logger: logging.Logger) -> None:
    """Make the children match the WebApp, then report. Safe to run any number of times, in any order."""
    with _locks[(namespace, name)]:
        app = get("WebApp", name, namespace)
        if going(app, app):
            return  # the garbage collector takes the children; there is nothing for us to do
        bucket = get("Bucket", f"{name}-assets", namespace) if app["spec"]["bucket"]["enabled"] else None
        bucket_url = ((bucket or {}).get("status") or {}).get("url", "")
        # The children first, then the owner once more, then each child written only if it has not
        # changed since it was read. Deleting the WebApp with --cascade=orphan makes the garbage collector
        # strip the children's ownerReferences; a reconcile already under way must not put them back, or
        # the collector then deletes the children it was told to keep. The collector starts only once the
        # WebApp is marked for deletion: if the second read shows no mark, any orphaning came later, and
        # the child's resourceVersion has moved on. (Kubernetes' own controllers re-read the owner before
        # they adopt anything, for the same reason.)
        wanted = desired(app, bucket_url)
        found = [get(c["kind"], c["metadata"]["name"], namespace) for c in wanted]
        if going(app, get("WebApp", name, namespace)):
            return
        try:
            problems = [p for p in (claim(app, c, old, logger) for c, old in zip(wanted, found, strict=True)) if p]
        except ConflictError as changed:
            # The change that moved the child on is an event of its own, and wakes this reconcile again.
            logger.info(f"a child changed while it was being written, reconciling on its event: {changed.summary()}")
            return
        if not app["spec"]["bucket"]["enabled"]:
            stale = get("Bucket", f"{name}-assets", namespace)
            owners = (stale or {}).get("metadata", {}).get("ownerReferences") or []
            # Once it is marked for deletion, deleting it again changes nothing: its own controller is
            # releasing it, and each event of the children would otherwise send one more delete.
            ours = any(r["uid"] == app["metadata"]["uid"] for r in owners)
            if ours and not stale["metadata"].get("deletionTimestamp"):
                logger.info(f"bucket no longer wanted: deleting Bucket {name}-assets")
                try:
                    api("Bucket").delete(name=f"{name}-assets", namespace=namespace)
                except NotFoundError:
                    pass  # gone between the read and the delete: what we wanted
        deployment = get("Deployment", name, namespace) or {}
        dstatus, want = deployment.get("status") or {}, app["spec"]["replicas"]
        available = int(dstatus.get("availableReplicas") or 0)
        rolled_out = (
            dstatus.get("observedGeneration") == deployment.get("metadata", {}).get("generation")
            and dstatus.get("updatedReplicas", 0) == want == available
            and dstatus.get("replicas", 0) == want
        )
        if problems:
            cond = ready_condition(app, False, "ChildConflict", "; ".join(problems))
        elif not rolled_out:
            cond = ready_condition(
                app,
                False,
                "Progressing",
                f"{dstatus.get('updatedReplicas', 0)}/{want} updated, {available} available",
            )
        elif app["spec"]["bucket"]["enabled"] and not bucket_url:
            cond = ready_condition(app, False, "WaitingForBucket", f"Bucket {name}-assets is not ready yet")
        else:
            cond = ready_condition(app, True, "Available", f"{available} replicas available")
        kinds = [f"{c['kind']}/{c['metadata']['name']}" for c in desired(app, bucket_url)]
        status = {
            "observedGeneration": app["metadata"]["generation"],
            "availableReplicas": available,
            "bucketURL": bucket_url,
            "children": kinds,
            "conditions": [cond],
        }
        if status != {k: (app.get("status") or {}).get(k) for k in status}:
            try:
                api("WebApp").status.patch(
                    name=name,
                    namespace=namespace,
                    body={"status": status},
                    content_type="application/merge-patch+json",
                )
            except NotFoundError:
                return  # deleted while we worked: there is no one left to report to
            logger.info(f"status: {cond['reason']} ({cond['message']})")


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL, field="spec")
def webapp_changed(namespace: str, name: str, logger: kopf.ObjectLogger, **_: Any) -> None:
    reconcile(namespace, name, logger)


def _child_changed(body: kopf.Body, logger: kopf.ObjectLogger, **_: Any) -> None:
    """A child changed or vanished, or an object offers itself: reconcile the WebApp concerned.

    The controller ownerReference names the owner of a child; the part-of label names the WebApp that
    an unowned object wants to join (the adoption consent), so labelling it wakes that WebApp up.
    """
    meta = body.get("metadata", {})
    refs = [r for r in meta.get("ownerReferences") or [] if r.get("controller")]
    if refs and refs[0].get("kind") == "WebApp":
        reconcile(meta["namespace"], refs[0]["name"], logger)
    elif not refs and (meta.get("labels") or {}).get(PART_OF):
        reconcile(meta["namespace"], meta["labels"][PART_OF], logger)


for _group_version, _plural in (
    ("v1", "configmaps"),
    ("v1", "services"),
    ("apps/v1", "deployments"),
    ("storage.krmcourse.dev/v1alpha1", "buckets"),
):
    kopf.on.event(_group_version, _plural, labels={PART_OF: kopf.PRESENT}, id=f"child-{_plural}")(
        _child_changed
    )
