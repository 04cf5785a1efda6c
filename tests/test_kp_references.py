"""KP5 on a real cluster: asset-store protection holds while an AssetStore is used, and converges after SIGKILL."""

from __future__ import annotations

import pytest

from krmcourse import Lab
from krmcourse.labcode import lab_module

LAB_NAME = "references"  # the lab fixture (conftest) brings it up for this module
LAB_INSTANCE = "kp-test"

pytestmark = [pytest.mark.cluster, pytest.mark.every_provider]
reflab = lab_module("references", "reflab")

STORES = "assetstores.refs.krmcourse.dev"


def test_real_pvc_protection_is_added_at_admission(lab: Lab) -> None:
    lab.apply(
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: fresh, namespace: db}\n"
        "spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}\n"
    )
    assert reflab.meta(lab, "pvc", "fresh", "db")["finalizers"] == ["kubernetes.io/pvc-protection"]


def test_protection_converges_after_sigkill(lab: Lab) -> None:
    names = [f"s{i}" for i in range(20)]
    lab.apply(
        [
            {
                "apiVersion": "refs.krmcourse.dev/v1",
                "kind": "AssetStore",
                "metadata": {"name": n, "namespace": "web"},
            }
            for n in names
        ]
    )
    # Every even asset store is used by a Website; the odd ones are not.
    lab.apply(
        [
            {
                "apiVersion": "refs.krmcourse.dev/v1",
                "kind": "Website",
                "metadata": {"name": f"site-{n}", "namespace": "web"},
                "spec": {"assetStoreRef": {"name": n}},
            }
            for n in names[::2]
        ]
    )
    ctl = lab.start("protector")
    try:
        lab.kubectl("delete", STORES, *names, "-n", "web", "--wait=false")
        ctl.kill_after_log("protection removed", timeout=30)
        ctl.restart()
        lab.wait_until(
            lambda: all(not reflab.meta(lab, STORES, n, "web") for n in names[1::2]),
            timeout=60,
            message="unused asset stores were not released after the restart",
        )
        for n in names[::2]:
            held = reflab.meta(lab, STORES, n, "web")
            assert (
                held.get("deletionTimestamp") and "refs.krmcourse.dev/assetstore-protection" in held["finalizers"]
            )
        lab.wait_until(
            lambda: reflab.resolved(lab, "site-s0").get("reason") == "AssetStoreDeleting",
            timeout=30,
            message="site-s0 was not told its asset store is being deleted",
        )
        lab.kubectl("delete", "websites.refs.krmcourse.dev", *[f"site-{n}" for n in names[::2]], "-n", "web")
        lab.wait_until(
            lambda: all(not reflab.meta(lab, STORES, n, "web") for n in names),
            timeout=60,
            message="asset stores stayed after their Websites were gone",
        )
    finally:
        ctl.stop()
