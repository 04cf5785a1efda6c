"""KP3 on a real cluster: both enforcers copy class values at creation, and the live controller
converges after SIGKILL.

The MutatingAdmissionPolicy and the Python webhook are tried on the same cluster, so the fallback
for API servers without MutatingAdmissionPolicy is proven too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest

from krmcourse import Lab, pins
from krmcourse.labcode import lab_module

pytestmark = pytest.mark.cluster
classlab = lab_module("classes", "classlab")
#: MutatingAdmissionPolicy is GA from this Kubernetes minor on: every cluster the course makes (pins.KUBERNETES)
#: must serve it, so only an older borrowed cluster may skip the policy path.
MAP_GA = (1, 36)


def server_version(lab: Lab) -> tuple[int, int]:
    """The API server's major and minor version, as its /version says."""
    said = json.loads(lab.kubectl("get", "--raw", "/version"))
    return int(said["major"]), int(re.match(r"\d+", said["minor"]).group())  # type: ignore[union-attr]


def test_the_pinned_kubernetes_is_one_where_the_policy_is_ga() -> None:
    major, minor = (int(n) for n in pins.KUBERNETES.lstrip("v").split(".")[:2])
    assert (major, minor) >= MAP_GA


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    lab = Lab("classes", instance="kp-test").up()
    lab.solve("mark-default")
    yield lab
    lab.down()


def cache(name: str, namespace: str, spec: str = "{}") -> str:
    return (
        "apiVersion: classes.krmcourse.dev/v1\nkind: Cache\n"
        f"metadata: {{name: {name}, namespace: {namespace}}}\nspec: {spec}\n"
    )


@pytest.mark.parametrize("webhook", [False, True], ids=["policy", "webhook"])
def test_enforcer_copies_defaults_only_where_asked(lab: Lab, webhook: bool) -> None:
    if not webhook and not classlab.mutating_admission_policy_served(lab):
        version = server_version(lab)
        assert version < MAP_GA, (
            f"Kubernetes {version[0]}.{version[1]} does not serve MutatingAdmissionPolicy, which is GA since "
            f"{MAP_GA[0]}.{MAP_GA[1]}: the policy path of this lab is not being tested")
        pytest.skip(f"Kubernetes {version[0]}.{version[1]} predates MutatingAdmissionPolicy's GA (a borrowed cluster)")
    enforcer = classlab.start_enforcer(lab, webhook=webhook)
    suffix = "wh" if webhook else "map"
    try:
        lab.apply(cache(f"a-{suffix}", "shop-copy", "{memoryMiB: 64}"))
        lab.apply(cache(f"b-{suffix}", "shop-copy", "{className: premium}"))
        lab.apply(cache(f"c-{suffix}", "shop-live"))
        assert classlab.cache(lab, "shop-copy", f"a-{suffix}")["spec"] == {
            "className": "standard",
            "memoryMiB": 64,
            "evictionPolicy": "allkeys-lru",
            "replicas": 1,
        }
        assert classlab.cache(lab, "shop-copy", f"b-{suffix}")["spec"]["memoryMiB"] == 1024
        assert classlab.cache(lab, "shop-live", f"c-{suffix}").get("spec", {}) == {}  # not opted in
    finally:
        enforcer.stop(lab)
    assert enforcer.process is None or not enforcer.process.alive
    lab.apply(cache(f"d-{suffix}", "shop-copy"))  # unregistered: creation works again, nothing is copied
    assert classlab.cache(lab, "shop-copy", f"d-{suffix}").get("spec", {}) == {}


def test_cache_controller_converges_after_sigkill(lab: Lab) -> None:
    names = [f"load-{i}" for i in range(25)]
    lab.apply(
        [
            {
                "apiVersion": "classes.krmcourse.dev/v1",
                "kind": "Cache",
                "metadata": {"name": n, "namespace": "shop-live"},
                "spec": {},
            }
            for n in names
        ]
    )
    ctl = lab.start("cache-controller", wait=False)  # to kill it in the middle of its first pass
    try:
        ctl.kill_after_log("shop-live/load-")
        lab.kubectl(
            "patch",
            "cacheclasses.classes.krmcourse.dev",
            "standard",
            "--type=merge",
            "-p",
            '{"spec": {"memoryMiB": 300}}',
        )  # the class changes while the controller is down
        ctl.restart()
        lab.wait_until(
            lambda: all(classlab.memory(lab, "shop-live", n)[1] == 300 for n in names),
            timeout=90,
            message="the live caches did not all converge on the class's new value",
        )
    finally:
        ctl.stop()
