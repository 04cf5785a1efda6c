"""Part IV kind-pair labs: the pure rules the reference controllers share with the exercise checks.

These tests need no cluster. They pin the rules the notebooks state (lookup order, binding choice,
class resolution, terminal phases, reference resolution) and check that kwok-stages.yaml is a
complete Stage set. The cluster behaviour is in tests/test_kp_*.py.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from krmcourse.labcode import lab_module

LABS = Path(__file__).resolve().parent.parent / "labs"


def load(lab: str, module: str) -> ModuleType:
    """labs/<lab>/controllers/<module>.py, a module of pure functions that a controller imports."""
    return lab_module(lab, f"controllers.{module}")


def meta(name: str, namespace: str | None = None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "uid": f"uid-{name}", "creationTimestamp": "2026-01-01T00:00:00Z"}
    if namespace:
        out["namespace"] = namespace
    return {**out, **extra}


# ------------------------------------------------------------------------------------------ KP1 twins


@pytest.fixture(scope="module")
def resolution() -> ModuleType:
    return load("cluster-scoped-twins", "resolution")


def test_twins_lookup_rules(resolution: ModuleType) -> None:
    store = {
        ("clusterimagepolicies.twins.krmcourse.dev", "base", None): {"spec": {"allowedRegistries": ["r.io"]}},
        ("imagepolicies.twins.krmcourse.dev", "mine", "a"): {"spec": {"allowedRegistries": ["teams.example.com/a"]}},
        ("imagepolicies.twins.krmcourse.dev", "theirs", "b"): {"spec": {"allowedRegistries": ["teams.example.com/a"]}},
    }

    def get(kind: str, name: str, namespace: str | None) -> dict[str, Any] | None:
        return store.get((kind, name, namespace))

    def app(image: str, ref: dict[str, str]) -> dict[str, Any]:
        return {"metadata": meta("x", "a"), "spec": {"image": image, "policyRef": ref}}

    ok = resolution.resolve(app("teams.example.com/a/x:1", {"name": "mine"}), get)
    assert (ok.admitted, ok.policy) == (True, "ImagePolicy/mine")  # kind defaults to the namespaced twin
    assert resolution.resolve(app("r.io/x", {"kind": "ClusterImagePolicy", "name": "base"}), get).admitted
    # A namespaced policy of another namespace is invisible, and there is no fallback to the cluster twin.
    assert resolution.resolve(app("teams.example.com/a/x", {"name": "theirs"}), get).reason == "PolicyNotFound"
    assert resolution.resolve(app("r.io/x", {"name": "base"}), get).reason == "PolicyNotFound"
    assert resolution.resolve(app("teams.example.com/ab/x", {"name": "mine"}), get).reason == "ImageNotAllowed"
    assert (
        resolution.resolve(app("r.io/x", {"kind": "Role", "name": "base"}), get).reason == "InvalidPolicyRef"
    )


# ------------------------------------------------------------------------------------------ KP2 claims


def test_claims_binding_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", "/nonexistent")  # the module never connects at import
    binder = load("claims", "binder")
    claim = {"metadata": meta("orders", "team-a"), "spec": {"engine": "postgres", "sizeGiB": 4}}
    free = {"metadata": meta("pg"), "spec": {"engine": "postgres", "sizeGiB": 5}}
    small = {"metadata": meta("tiny"), "spec": {"engine": "postgres", "sizeGiB": 2}}
    other = {"metadata": meta("my"), "spec": {"engine": "mysql", "sizeGiB": 50}}
    reserved = {
        "metadata": meta("held"),
        "spec": {"engine": "postgres", "sizeGiB": 5, "claimRef": {"namespace": "team-a", "name": "orders"}},
    }
    taken = {
        "metadata": meta("used"),
        "spec": {"engine": "postgres", "sizeGiB": 5, "claimRef": {"namespace": "x", "name": "y", "uid": "u"}},
    }
    deleting = {
        "metadata": meta("gone", deletionTimestamp="2026-01-01T00:00:00Z"),
        "spec": {"engine": "postgres", "sizeGiB": 5},
    }
    assert [binder.fits(d, claim) for d in (free, small, other, reserved, taken, deleting)] == [
        True,
        False,
        False,
        True,
        False,
        False,
    ]
    claims = {("team-a", "orders"): claim}
    bound = {
        "metadata": meta("b"),
        "spec": {"claimRef": {"namespace": "team-a", "name": "orders", "uid": "uid-orders"}},
    }
    stale = {
        "metadata": meta("s"),
        "spec": {"claimRef": {"namespace": "team-a", "name": "orders", "uid": "an-older-claim"}},
    }
    assert [binder.database_phase(d, claims) for d in (free, bound, stale)] == [
        "Available",
        "Bound",
        "Released",
    ]


# ------------------------------------------------------------------------------------------ KP3 classes


def test_classes_default_and_effective_values() -> None:
    classes = load("classes", "classes")
    mark = {classes.DEFAULT_ANNOTATION: "true"}
    std = {
        "metadata": {**meta("standard"), "annotations": mark},
        "spec": {"memoryMiB": 256, "evictionPolicy": "allkeys-lru", "replicas": 1},
    }
    newer = {
        "metadata": {**meta("premium"), "annotations": mark, "creationTimestamp": "2026-02-01T00:00:00Z"},
        "spec": {"memoryMiB": 1024, "evictionPolicy": "noeviction", "replicas": 3},
    }
    assert classes.default_class([std])["metadata"]["name"] == "standard"
    assert classes.default_class([std, newer])["metadata"]["name"] == "premium"  # newest default wins
    assert classes.default_class([{**std, "metadata": meta("standard")}]) is None
    cache = {"metadata": meta("c", "ns"), "spec": {"memoryMiB": 64}}
    values, sources = classes.effective(cache, classes.class_for(cache, [std]))
    assert values == {"memoryMiB": 64, "evictionPolicy": "allkeys-lru", "replicas": 1}
    assert sources == {"memoryMiB": "spec", "evictionPolicy": "class", "replicas": "class"}
    assert classes.class_for({"spec": {"className": "nope"}}, [std]) is None
    ops = classes.defaults_patch(cache, std)
    assert {op["path"]: op["value"] for op in ops} == {
        "/spec/className": "standard",
        "/spec/evictionPolicy": "allkeys-lru",
        "/spec/replicas": 1,
    }


# ------------------------------------------------------------------------------------------ KP4 job-like


def test_joblike_outcome_and_job_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", "/nonexistent")
    ctl = load("job-like", "backup_controller")
    assert ctl.job_outcome({"status": {}}) is None
    assert (
        ctl.job_outcome({"status": {"conditions": [{"type": "Complete", "status": "True"}]}})[0]
        == "Succeeded"
    )
    assert ctl.job_outcome(
        {
            "status": {
                "conditions": [
                    {"type": "FailureTarget", "status": "True"},
                    {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"},
                ]
            }
        }
    ) == ("Failed", "BackoffLimitExceeded")
    backup = {
        "metadata": meta("nightly", "shop"),
        "spec": {"database": "orders", "simulate": {"outcome": "Failed", "after": "2s"}},
    }
    job = ctl.job_for(backup)
    assert job["metadata"]["name"] == "backup-nightly"  # derived, so a restart finds it again
    assert job["metadata"]["ownerReferences"][0]["uid"] == "uid-nightly"
    assert job["spec"]["template"]["metadata"]["annotations"] == {
        "kwok.krmcourse.dev/outcome": "Failed",
        "kwok.krmcourse.dev/after": "2s",
    }


def test_kwok_stages_are_a_complete_set() -> None:
    """kwok drops all its default Stages once any is configured, so nodes and pods must both be covered."""
    docs = [d for d in yaml.safe_load_all((LABS / "job-like" / "kwok-stages.yaml").read_text()) if d]
    assert {d["kind"] for d in docs} == {"Stage"}
    names = [d["metadata"]["name"] for d in docs]
    assert len(names) == len(set(names))
    kinds = {d["spec"]["resourceRef"]["kind"] for d in docs}
    assert kinds == {"Node", "Pod"}
    text = (LABS / "job-like" / "kwok-stages.yaml").read_text()
    assert "kwok.krmcourse.dev/outcome" in text and "kwok.krmcourse.dev/after" in text


# ------------------------------------------------------------------------------------------ KP5 references


def test_references_rules() -> None:
    refs = load("references", "references")
    store = {"metadata": meta("assets", "web")}
    sites = [
        {"metadata": meta("blog", "web"), "spec": {"assetStoreRef": {"name": "assets"}}},
        {"metadata": meta("old", "web", deletionTimestamp="x"), "spec": {"assetStoreRef": {"name": "assets"}}},
        {"metadata": meta("elsewhere", "other"), "spec": {"assetStoreRef": {"name": "assets"}}},
    ]
    assert refs.users(store, sites) == ["blog"]  # a Website being deleted no longer holds the AssetStore
    assert refs.resolution(sites[0], [store])[1] == "AssetStoreFound"
    assert refs.resolution(sites[2], [store])[1] == "AssetStoreNotFound"  # same name, other namespace
    deleting = {"metadata": meta("assets", "web", deletionTimestamp="x")}
    assert refs.resolution(sites[0], [deleting])[1] == "AssetStoreDeleting"
