"""Notebook helpers for the classes lab: start and stop the enforcer webhook, read Cache state."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from krmcourse import Lab, ManagedProcess
from krmcourse.webhooks import endpoint_for, wait_for_port

WEBHOOK_NAME = "cache-defaults.classes.krmcourse.dev"
POLICY_NAME = "cache-defaults.classes.krmcourse.dev"


def mutating_admission_policy_served(lab: Lab) -> bool:
    """Whether this API server serves MutatingAdmissionPolicy (CEL mutations), asked through discovery."""
    names = lab.kubectl("api-resources", "--api-group=admissionregistration.k8s.io", "-o", "name")
    return any(n.startswith("mutatingadmissionpolicies.") for n in names.split())


def webhook_configuration(url: str, ca_bundle: str) -> dict[str, Any]:
    """Call the enforcer for every Cache created in a namespace that opted in to copied defaults."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": WEBHOOK_NAME},
        "webhooks": [
            {
                "name": WEBHOOK_NAME,
                "clientConfig": {"url": url, "caBundle": ca_bundle},
                "rules": [
                    {
                        "apiGroups": ["classes.krmcourse.dev"],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["caches"],
                        "scope": "Namespaced",
                    }
                ],
                "namespaceSelector": {"matchLabels": {"classes.krmcourse.dev/copy-defaults": "true"}},
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Fail",
                "timeoutSeconds": 5,
            }
        ],
    }


@dataclass
class Enforcer:
    """The copy-at-creation enforcer that is active: a MutatingAdmissionPolicy, or a webhook process."""

    kind: str
    process: ManagedProcess | None = None

    def stop(self, lab: Lab) -> None:
        """Unregister first, so no Cache create fails against an enforcer that is gone."""
        for resource, name in (
            ("mutatingadmissionpolicybinding", POLICY_NAME),
            ("mutatingadmissionpolicy", POLICY_NAME),
            ("mutatingwebhookconfiguration", WEBHOOK_NAME),
        ):
            if lab.get(resource, name) is not None:
                lab.delete(resource, name)
        lab.wait_until(lambda: not copies_defaults(lab), timeout=30, interval=0.5,
                       message=f"the API server still applies the {self.kind} after it was deleted")
        if self.process is not None:
            self.process.stop()


def start_enforcer(lab: Lab, webhook: bool | None = None) -> Enforcer:
    """Copy class values into new Caches: with a MutatingAdmissionPolicy where the API server serves
    one (GA in Kubernetes 1.36), else with the lab's Python webhook. ``webhook=True`` forces the
    webhook (the tests prove both ways work on the same cluster)."""
    if webhook is None:
        webhook = not mutating_admission_policy_served(lab)
    if not webhook:
        lab.apply(lab.path / "enforcer-policy.yaml")
        enforcer = Enforcer("MutatingAdmissionPolicy")
    else:
        endpoint = endpoint_for(lab, lab.home / "enforcer-tls")
        proc = lab.start("enforcer", "--host", endpoint.host, "--port", str(endpoint.port),
                         "--cert", str(endpoint.tls.cert), "--key", str(endpoint.tls.key))
        wait_for_port(endpoint.port, host=endpoint.host)
        lab.apply(webhook_configuration(endpoint.url("/mutate"), endpoint.tls.ca_bundle))
        enforcer = Enforcer("MutatingWebhookConfiguration", proc)
    lab.wait_until(
        lambda: copies_defaults(lab),
        timeout=30,
        interval=0.5,
        message=f"the {enforcer.kind} never started copying defaults",
    )
    return enforcer


def start_webhook_enforcer(lab: Lab) -> list[str]:
    """The webhook enforcer, started and registered as the notebook's start_enforcer does (the webhook even
    where a MutatingAdmissionPolicy is served), for the fault harness: ``prepare:`` in lab.yaml.

    Returns the arguments it runs with. Its address, port and certificate are made per cluster, so lab.yaml
    cannot declare them: whoever starts it again must pass these, ``lab.start("enforcer", *args)``; with
    no arguments it exits at once, and the API server refuses every Cache created in shop-copy.
    """
    enforcer = start_enforcer(lab, webhook=True)
    assert enforcer.process is not None  # a webhook enforcer has its process
    return enforcer.process.argv[2:]  # after the interpreter and the script


def _admitted(lab: Lab, probe: str, output: str) -> str:
    """What admission makes of ``probe`` (YAML) now, printed as ``output``: a dry run stores nothing.

    The API server picks up admission configuration, and the classes it defaults from, asynchronously,
    from its own watches: after they are created or deleted."""
    return lab.kubectl("create", "--dry-run=server", "-o", output, "-f", "-", input=probe, check=False)


def copies_defaults(lab: Lab) -> bool:
    """Whether a new Cache in shop-copy gets class values now."""
    probe = "apiVersion: classes.krmcourse.dev/v1\nkind: Cache\nmetadata: {name: probe, namespace: shop-copy}\n"
    return "className" in _admitted(lab, probe, "yaml")


def default_storage_class(lab: Lab, namespace: str) -> str:
    """The storageClassName admission writes into a new claim that names none ("" while it knows no
    default class yet)."""
    probe = (f"apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: probe, namespace: {namespace}}}\n"
             "spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}\n")
    return _admitted(lab, probe, "jsonpath={.spec.storageClassName}").strip()


def cache(lab: Lab, namespace: str, name: str) -> dict[str, Any]:
    """The Cache as a dict ({} when missing)."""
    return lab.get("caches.classes.krmcourse.dev", name, namespace=namespace) or {}


def memory(lab: Lab, namespace: str, name: str) -> tuple[int | None, int | None]:
    """(spec.memoryMiB, status.effective.memoryMiB): what the object says, and what it really gets."""
    body = cache(lab, namespace, name)
    return body.get("spec", {}).get("memoryMiB"), body.get("status", {}).get("effective", {}).get("memoryMiB")


# --------------------------------------------------------------------------- exercise 1: the classes handed over
HANDOVER = "handover"  # a ConfigMap in classes-system: the classes an earlier admin left, made per cluster
CLASSES = "cacheclasses.classes.krmcourse.dev"
_ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"  # no 0/o, 1/l/i: names are read off a screen


def handed_over(lab: Lab) -> list[str]:
    """The names of the classes an earlier admin left ([] before :func:`hand_over` has run)."""
    cm = lab.get("configmap", HANDOVER, namespace="classes-system")
    return ((cm or {}).get("data") or {}).get("classes", "").split()


def hand_over(lab: Lab) -> list[str]:
    """Add the classes an earlier admin left behind, once per cluster: three, with names drawn afresh.

    One of them carries the default mark, as the class rules read it; another carries a look-alike that the
    rules ignore (a label). Which is which is drawn too, so only the cluster says where the mark is.
    """
    import secrets

    names = handed_over(lab)
    if names:
        return names
    rng = secrets.SystemRandom()
    words = rng.sample(["legacy", "batch", "edge", "archive", "burst", "scratch"], 3)
    names = [f"{w}-{''.join(rng.choice(_ALPHABET) for _ in range(4))}" for w in words]
    marked, lookalike = rng.sample(names, 2)
    key = lab.support("controllers.classes").DEFAULT_ANNOTATION
    classes = []
    for name in names:
        meta: dict[str, Any] = {"name": name, "labels": {"classes.krmcourse.dev/owner": "earlier-admin"}}
        if name == marked:
            meta["annotations"] = {key: "true"}
        if name == lookalike:
            meta["labels"][key] = "true"
        classes.append({"apiVersion": "classes.krmcourse.dev/v1", "kind": "CacheClass", "metadata": meta,
                        "spec": {"memoryMiB": rng.choice([64, 128, 512, 2048]),
                                 "evictionPolicy": rng.choice(["allkeys-lru", "volatile-lru", "noeviction"]),
                                 "replicas": rng.randint(1, 5)}})
    lab.apply(classes)
    lab.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": HANDOVER, "namespace": "classes-system"},
               "data": {"classes": " ".join(names)}})
    return names
