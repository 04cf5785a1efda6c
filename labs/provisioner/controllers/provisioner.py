"""The Provisioner: turns each Bucket object into a bucket in the lab's pretend cloud.

Run it with ``lab.run_kopf(...)`` (``kopf run --standalone``). It learns where the cloud is from the
ConfigMap ``krm-system/provisioner-config`` (keys ``cloudURL`` and ``cloudTimeout``).

What it promises, and where in this file:
- creation is idempotent: the cloud name comes from the object, and "already exists" counts as done;
- one reconcile step never waits for the cloud longer than ``cloudTimeout``: a slow or broken cloud
  becomes a condition in status and a retry later, not a stuck handler;
- drift is found by looking: a timer re-reads the cloud bucket, recreates it when it vanished and puts
  storage class and versioning back when someone changed them behind the controller's back; the timer
  and the handlers take turns on a Bucket, and a tick that read an older generation than a handler has
  already taken on does nothing;
- deletion goes through a finalizer, so the cloud bucket is removed (or kept, with ``Retain``) before
  the object disappears, and no drift check runs for a Bucket once its deletion has begun.
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
from collections import defaultdict
from typing import Any

import kopf
import kubernetes

from krmcourse.cloud import BucketExists, CloudClient, CloudError, CloudUnavailable

GROUP, VERSION, PLURAL = "storage.krmcourse.dev", "v1alpha1", "buckets"
CONFIG_NAMESPACE, CONFIG_NAME = "krm-system", "provisioner-config"
FINALIZER = "storage.krmcourse.dev/cloud-bucket"
DRIFT_CHECK_SECONDS = 3.0  # the lab looks every few seconds so you can watch; real ones wait minutes
RETRY_SECONDS = 2.0
#: Per Bucket (by uid, as a Bucket made again under the same name starts at generation 1): one sync at a
#: time, and the newest generation a sync has started on. kopf runs the timer beside the handlers, so a
#: drift check that read the object just before a spec change could otherwise finish after the change
#: was handled, and put the old storage class back in the cloud.
_locks: defaultdict[str, threading.Lock] = defaultdict(threading.Lock)
_newest: dict[str, int] = {}
#: Buckets (by uid) whose deletion handler has run: a drift tick that read the object before its deletion
#: must not find the cloud bucket gone and make it again, behind an object about to disappear.
_released: set[str] = set()


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=GROUP)
    settings.posting.level = logging.WARNING  # events for trouble only: drift, outages
    settings.watching.server_timeout = 60
    settings.execution.default_backoff = RETRY_SECONDS  # unexpected errors retry soon too, not in a minute
    # A Bucket keeps the finalizer until its drift timer has stopped. kopf gives a timer a few turns of its
    # event loop to stop at once and otherwise looks again only after a minute, so a Bucket deleted while
    # its timer was busy with the cloud stayed Terminating for that minute. Look again every second.
    settings.background.cancellation_polling = 1.0
    logging.getLogger("httpx").setLevel(logging.WARNING)  # our own log line per reconcile says enough
    kubernetes.config.load_kube_config()


def cloud_client() -> CloudClient:
    """Read the cloud's address from the ConfigMap each time, so a moved cloud needs no restart."""
    try:
        cm = kubernetes.client.CoreV1Api().read_namespaced_config_map(CONFIG_NAME, CONFIG_NAMESPACE)
    except kubernetes.client.ApiException as exc:
        raise CloudUnavailable(
            f"no cloud configured: cannot read ConfigMap {CONFIG_NAMESPACE}/{CONFIG_NAME} ({exc.reason})"
        ) from exc
    data = cm.data or {}
    return CloudClient(data.get("cloudURL", "http://127.0.0.1:1"), timeout=float(data.get("cloudTimeout", 2)))


def cloud_name(namespace: str, name: str) -> str:
    """The bucket's name in the cloud. Derived, never random, so a retry finds what an earlier try made."""
    return f"{namespace}-{name}"


def condition(status: dict[str, Any], ready: bool, reason: str, message: str, generation: int) -> list[dict]:
    """The Ready condition, keeping lastTransitionTime when the status value does not change."""
    old = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {})
    value = "True" if ready else "False"
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    since = old.get("lastTransitionTime", now) if old.get("status") == value else now
    return [
        {
            "type": "Ready",
            "status": value,
            "reason": reason,
            "message": message,
            "observedGeneration": generation,
            "lastTransitionTime": since,
        }
    ]


def sync(
    spec: dict[str, Any],
    meta: dict[str, Any],
    status: dict[str, Any],
    patch: kopf.Patch,
    logger: logging.Logger | kopf.ObjectLogger,
) -> bool:
    """One bounded step towards the desired bucket. Writes status; returns True when the bucket is ready."""
    started = time.monotonic()
    bucket_name = cloud_name(meta["namespace"], meta["name"])
    generation = int(meta.get("generation", 0))
    ready, reason, message = False, "Provisioning", ""
    try:
        cloud = cloud_client()
        bucket = cloud.get_bucket(bucket_name)
        if bucket is None:
            if status.get("bucketName"):  # it existed before: someone deleted it behind our back
                logger.warning(f"drift: cloud bucket {bucket_name} is gone; creating it again")
                patch.status["recreations"] = int(status.get("recreations") or 0) + 1
            try:
                bucket = cloud.create_bucket(
                    bucket_name,
                    location=spec["location"],
                    storage_class=spec["storageClass"],
                    versioning=spec["versioning"],
                )
            except BucketExists:
                bucket = cloud.get_bucket(bucket_name) or {}
        if bucket.get("location") != spec["location"]:
            raise CloudError(f"the cloud bucket is in {bucket.get('location')}, not {spec['location']}")
        wrong = {k: spec[k] for k in ("storageClass", "versioning") if bucket.get(k) != spec[k]}
        if wrong:
            logger.info(f"drift: setting {wrong} on cloud bucket {bucket_name}")
            bucket = cloud.update_bucket(bucket_name, **wrong)
        patch.status["bucketName"] = bucket_name
        patch.status["url"] = bucket.get("url", "")
        patch.status["cloudState"] = bucket.get("state", "")
        ready = bucket.get("state") == "READY"
        reason = "Ready" if ready else "Provisioning"
        message = f"cloud bucket {bucket_name} is {bucket.get('state')}"
    except CloudUnavailable as exc:
        reason, message = "CloudUnavailable", str(exc)
    except CloudError as exc:
        reason, message = "CloudRejected", str(exc)
    patch.status["observedGeneration"] = generation
    patch.status["conditions"] = condition(status, ready, reason, message, generation)
    elapsed = time.monotonic() - started
    logger.info(f"reconcile took {elapsed:.2f}s -> {reason}")
    return ready


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL, field="spec")
def reconcile(
    spec: kopf.Spec,
    meta: kopf.Meta,
    status: kopf.Status,
    patch: kopf.Patch,
    logger: kopf.ObjectLogger,
    **_: Any,
) -> None:
    """React to a new or changed Bucket. Not ready yet: status says why, and kopf retries later."""
    key = meta["uid"]
    with _locks[key]:
        _newest[key] = max(_newest.get(key, 0), int(meta.get("generation", 0)))
        ready = sync(dict(spec), dict(meta), dict(status), patch, logger)
    if not ready:
        raise kopf.TemporaryError("the bucket is not ready yet", delay=RETRY_SECONDS)


@kopf.timer(GROUP, VERSION, PLURAL, interval=DRIFT_CHECK_SECONDS, initial_delay=DRIFT_CHECK_SECONDS)
def detect_drift(
    spec: kopf.Spec,
    meta: kopf.Meta,
    status: kopf.Status,
    patch: kopf.Patch,
    logger: kopf.ObjectLogger,
    **_: Any,
) -> None:
    """The cloud has no watch, so look at it again every few seconds; level-triggered, not event-triggered."""
    key = meta["uid"]
    with _locks[key]:
        if meta.get("deletionTimestamp") or key in _released:
            return  # being deleted: the cloud bucket is release()'s business now
        if int(meta.get("generation", 0)) < _newest.get(key, 0):
            return  # this tick read the object before its latest change, which a handler has taken on
        _newest[key] = int(meta.get("generation", 0))
        sync(dict(spec), dict(meta), dict(status), patch, logger)


@kopf.on.delete(GROUP, VERSION, PLURAL)
def release(spec: kopf.Spec, meta: kopf.Meta, body: kopf.Body, logger: kopf.ObjectLogger, **_: Any) -> None:
    """Runs while the finalizer holds the object: the cloud bucket goes first, then the object."""
    with _locks[meta["uid"]]:  # waits for a drift check under way, and keeps later ones out
        _released.add(meta["uid"])
    bucket_name = cloud_name(meta["namespace"], meta["name"])
    if spec.get("deletionPolicy") == "Retain":
        logger.info(f"deletionPolicy Retain: leaving cloud bucket {bucket_name} in place")
        # Said as an Event too, which outlives the object: the record that the data was kept on purpose.
        kopf.event(body, type="Normal", reason="Retained",
                   message=f"deletionPolicy Retain: cloud bucket {bucket_name} left in place")
        return
    try:
        existed = cloud_client().delete_bucket(bucket_name)
    except CloudUnavailable as exc:
        raise kopf.TemporaryError(f"cannot delete {bucket_name} yet: {exc}", delay=RETRY_SECONDS) from exc
    logger.info(f"deleted cloud bucket {bucket_name}" if existed else f"cloud bucket {bucket_name} was gone")
