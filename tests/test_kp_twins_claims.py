"""KP1 and KP2 on real clusters: the twins RBAC denials, and both controllers converging after SIGKILL.

Each controller runs as its own ServiceAccount, is killed (SIGKILL) in the middle of a pass over many
objects, restarted, and must reach the same end state as an uninterrupted run.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from krmcourse import Lab

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def twins() -> Iterator[Lab]:
    lab = Lab("cluster-scoped-twins", instance="kp-test").up()
    yield lab
    lab.down()


@pytest.fixture(scope="module")
def claims() -> Iterator[Lab]:
    lab = Lab("claims", instance="kp-test").up()
    yield lab
    lab.down()


def test_only_the_admin_writes_the_cluster_twin(twins: Lab) -> None:
    helpers = twins.support("twins")

    policy = (
        "apiVersion: twins.krmcourse.dev/v1\nkind: ClusterImagePolicy\nmetadata: {name: t-wide}\n"
        "spec: {allowedRegistries: [x.io]}\n"
    )
    assert (
        "forbidden" in twins.kubectl_as("dev", "team-a", "create", "-f", "-", input=policy).lower()
    )
    assert "created" in twins.kubectl_as("admin", "platform", "create", "-f", "-", input=policy)
    assert helpers.can_i(twins, "dev", "team-a", "create", "imagepolicies.twins.krmcourse.dev", "team-a")
    assert not helpers.can_i(twins, "dev", "team-a", "create", "imagepolicies.twins.krmcourse.dev", "team-b")


def test_policy_controller_converges_after_sigkill(twins: Lab) -> None:
    apps = [
        {
            "apiVersion": "twins.krmcourse.dev/v1",
            "kind": "App",
            "metadata": {"name": f"load-{i}", "namespace": "team-a"},
            "spec": {
                "image": "images.example.com/pause:3.10" if i % 2 else "elsewhere.example.net/x:1",
                "policyRef": {"kind": "ClusterImagePolicy", "name": "baseline"},
            },
        }
        for i in range(30)
    ]
    twins.apply(apps)
    ctl = twins.start("policy-controller", wait=False)  # to kill it in the middle of its first pass
    try:
        ctl.kill_after_log("admitted=")
        judged = [
            a
            for a in apps
            if (twins.get("apps.twins.krmcourse.dev", a["metadata"]["name"], "team-a") or {}).get("status")
        ]
        assert len(judged) < len(apps), "the kill came too late to interrupt the pass"
        ctl.restart()

        def verdicts() -> dict[str, str]:
            out = {}
            for a in apps:
                body = twins.get("apps.twins.krmcourse.dev", a["metadata"]["name"], "team-a") or {}
                conds = body.get("status", {}).get("conditions", [])
                out[a["metadata"]["name"]] = conds[0]["reason"] if conds else ""
            return out

        twins.wait_until(lambda: all(verdicts().values()), timeout=60, message="not every App was judged")
        assert verdicts() == {f"load-{i}": "PolicyAllows" if i % 2 else "ImageNotAllowed" for i in range(30)}
    finally:
        ctl.stop()


def test_binder_converges_after_sigkill_without_double_binding(claims: Lab) -> None:
    # 6 claims fit the existing pg-billing / pg-small only partly; the rest need provisioning.
    claim_objs = [
        {
            "apiVersion": "claims.krmcourse.dev/v1",
            "kind": "DatabaseClaim",
            "metadata": {"name": f"c{i}", "namespace": "team-b"},
            "spec": {"engine": "postgres", "sizeGiB": 3},
        }
        for i in range(12)
    ]
    claims.apply(claim_objs)
    binder = claims.start("binder", wait=False)  # to kill it in the middle of its first pass
    try:
        binder.kill_after_log("provisioned for claim")
        binder.restart()

        def bound(name: str) -> bool:
            body = claims.get("databaseclaims.claims.krmcourse.dev", name, "team-b") or {}
            conds = body.get("status", {}).get("conditions", [])
            return any(c["type"] == "Bound" and c["status"] == "True" for c in conds)

        claims.wait_until(
            lambda: all(bound(c["metadata"]["name"]) for c in claim_objs),
            timeout=90,
            message="not every claim was bound after the restart",
        )
        dbs = claims.objects("databases.claims.krmcourse.dev")
        bound_to = [
            d["spec"]["claimRef"]["name"]
            for d in dbs
            if (d["spec"].get("claimRef") or {}).get("namespace") == "team-b"
            and d["spec"]["claimRef"].get("uid")
        ]
        bound_to = [name for name in bound_to if name != "old-orders"]  # pg-legacy's long-gone claim
        assert sorted(bound_to) == sorted(c["metadata"]["name"] for c in claim_objs)  # one Database per claim
        for c in claim_objs:
            body = claims.get("databaseclaims.claims.krmcourse.dev", c["metadata"]["name"], "team-b")
            db = next(d for d in dbs if d["metadata"]["name"] == body["spec"]["databaseName"])
            assert db["spec"]["claimRef"]["uid"] == body["metadata"]["uid"]  # both directions agree
        # Delete reclaim: provisioned Databases go with their claims; the protection finalizer lets them.
        provisioned = [d["metadata"]["name"] for d in dbs if d["metadata"]["name"].startswith("db-")
                       and (d["spec"].get("claimRef") or {}).get("namespace") == "team-b"]  # not billing's
        assert provisioned
        claims.kubectl("delete", "databaseclaims.claims.krmcourse.dev", "--all", "-n", "team-b")
        claims.wait_until(
            lambda: all(claims.get("databases.claims.krmcourse.dev", n) is None for n in provisioned),
            timeout=60,
            message="provisioned Databases outlived their claims",
        )
    finally:
        binder.stop()
