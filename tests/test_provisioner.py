"""The provisioner lab: the pretend cloud behaves, and the provisioner converges whatever happens.

The cloud is tested on its own without a cluster. The cluster tests run the reference provisioner as
its ServiceAccount against a real lab cluster, kill it with SIGKILL in the middle of its work, and
read the outcome from the API server and from the cloud.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import kopf
import pytest

from krmcourse import CheckFailed, Lab
from krmcourse.cloud import BucketExists, Cloud, CloudClient, CloudError, CloudUnavailable
from krmcourse.labcode import lab_module

prov = lab_module("provisioner", "provisioner_support")
controller_module = lab_module("provisioner", "controllers.provisioner")

BUCKET = "storage.krmcourse.dev/v1alpha1"


# ----------------------------------------------------------------------------- the cloud alone


def test_cloud_lifecycle_and_errors() -> None:
    with Cloud(provision_seconds=0.3) as cloud:
        client = CloudClient(cloud.url, timeout=1)
        assert client.create_bucket("one")["state"] == "CREATING"
        with pytest.raises(BucketExists):
            client.create_bucket("one")
        Lab.wait_until(lambda: client.get_bucket("one")["state"] == "READY", timeout=30,
                       message="the bucket never became READY")
        assert client.update_bucket("one", storageClass="COLDLINE")["storageClass"] == "COLDLINE"
        with pytest.raises(CloudError, match="location cannot change"):
            client.update_bucket("one", location="local-2")
        with pytest.raises(CloudError, match="bad bucket name"):
            client.create_bucket("No_Good")
        with pytest.raises(CloudError, match="choose one of"):
            client.create_bucket("two", storage_class="GOLD")
        assert client.delete_bucket("one") is True and client.delete_bucket("one") is False
        assert client.get_bucket("one") is None
        assert [(c["bucket"], c["status"]) for c in client.calls()][:3] == [("one", 202), ("one", 409),
                                                                             ("one", 200)]


def test_cloud_faults_make_the_client_raise_cloud_unavailable() -> None:
    with Cloud() as cloud:
        client = CloudClient(cloud.url, timeout=0.5)
        client.set_faults(outage=True)
        with pytest.raises(CloudUnavailable, match="503"):
            client.list_buckets()
        assert client.healthy()  # the process is up; only the bucket API is out
        client.set_faults(outage=False, fail_next=1)
        with pytest.raises(CloudUnavailable, match="500"):
            client.list_buckets()
        assert client.list_buckets() == []
        # The cloud holds its answer for a minute, so the client can only have raised on its own timeout,
        # whatever the machine's speed (no stopwatch here: a busy machine is not a failure).
        client.set_faults(latency=60)
        with pytest.raises(CloudUnavailable, match=r"no answer within 0\.5 ?s"):
            client.list_buckets()
        with pytest.raises(CloudError, match="unknown fault settings"):
            client.set_faults(speed=3)


def test_cloud_stop_frees_the_port_and_the_module_runs_as_a_process() -> None:
    cloud = Cloud().start()
    port = int(cloud.url.rsplit(":", 1)[1])
    cloud.stop()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))  # free again
    proc = subprocess.Popen([sys.executable, "-m", "krmcourse.cloud", "--provision-seconds", "0"],
                            stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert line.startswith("cloud listening on http://127.0.0.1:")
        assert CloudClient(line.split()[-1]).create_bucket("from-process")["name"] == "from-process"
    finally:
        proc.terminate()
        assert proc.wait(10) == 0


def test_unreachable_cloud_is_unavailable_not_a_crash() -> None:
    with pytest.raises(CloudUnavailable, match="cannot reach the cloud"):
        CloudClient("http://127.0.0.1:1", timeout=0.5).list_buckets()


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, str]]:
    """The provisioner's module, without a cluster, talking to a cloud of its own: (module, cloud URL).
    Its handlers are called directly, with a kopf.Patch to collect what they would write."""
    provisioner = controller_module
    with Cloud(provision_seconds=0) as cloud:
        monkeypatch.setattr(provisioner, "cloud_client", lambda: CloudClient(cloud.url, timeout=2))
        yield provisioner, cloud.url


LOG = logging.getLogger("test")
SPEC = {"location": "local-1", "storageClass": "STANDARD", "versioning": False}


def test_a_drift_check_that_read_an_older_generation_does_not_undo_a_newer_one(
        offline: tuple[Any, str]) -> None:
    """kopf runs the drift timer beside the handlers. A tick that read the Bucket at generation 1 and
    runs after the handler took on generation 2 must leave the cloud and the status alone; it used to
    put the old storage class back and report generation 1 (a CI run's check failed on that once)."""
    provisioner, url = offline
    meta = {"namespace": "team-a", "name": "photos", "uid": "u-1"}
    for generation, storage_class in ((1, "STANDARD"), (2, "COLDLINE")):
        patch = kopf.Patch()
        with contextlib.suppress(kopf.TemporaryError):  # a bucket just made is not READY at once
            provisioner.reconcile(spec={**SPEC, "storageClass": storage_class},
                                  meta={**meta, "generation": generation}, status={}, patch=patch, logger=LOG)
        assert patch.status["observedGeneration"] == generation
    stale = kopf.Patch()
    provisioner.detect_drift(spec=SPEC, meta={**meta, "generation": 1}, status={}, patch=stale, logger=LOG)
    assert CloudClient(url).get_bucket("team-a-photos")["storageClass"] == "COLDLINE"
    assert not stale, f"a tick that read generation 1 wrote {dict(stale)}"
    fresh = kopf.Patch()  # the next tick, with the object as it is now, still looks at the cloud
    provisioner.detect_drift(spec={**SPEC, "storageClass": "COLDLINE"}, meta={**meta, "generation": 2},
                             status={}, patch=fresh, logger=LOG)
    assert fresh.status["observedGeneration"] == 2


def test_a_drift_check_that_read_the_bucket_before_its_deletion_does_not_make_it_again(
        offline: tuple[Any, str]) -> None:
    """A tick that read the Bucket just before it was deleted, and runs after release() removed the cloud
    bucket, must not take the missing bucket for drift and create it again: the object then disappears
    and the new cloud bucket is left behind, owned by nothing."""
    provisioner, url = offline
    meta = {"namespace": "team-a", "name": "logs", "uid": "u-2", "generation": 1}
    made = kopf.Patch()
    with contextlib.suppress(kopf.TemporaryError):
        provisioner.reconcile(spec=SPEC, meta=meta, status={}, patch=made, logger=LOG)
    status = dict(made.status)  # what the tick read: the bucket was made
    provisioner.release(spec=SPEC, meta=meta, body={}, logger=LOG)
    assert CloudClient(url).get_bucket("team-a-logs") is None
    stale = kopf.Patch()
    provisioner.detect_drift(spec=SPEC, meta=meta, status=status, patch=stale, logger=LOG)
    assert CloudClient(url).get_bucket("team-a-logs") is None, "the tick made the deleted bucket again"
    assert not stale, f"a tick after the deletion wrote {dict(stale)}"


# ----------------------------------------------------------------------------- against a cluster


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    lab = Lab("provisioner", instance="tests").up()
    prov.start_cloud(lab, provision_seconds=6)
    yield lab
    prov.stop_all(lab)
    lab.down()


@pytest.fixture(autouse=True)
def _healthy_cloud_after(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that injects a fault and then fails must not leave the next test an unhealthy cloud."""
    yield
    if "lab" in request.fixturenames:
        prov.cloud(request.getfixturevalue("lab")).set_faults(outage=False, latency=0, fail_next=0)


def _bucket(name: str, **spec: object) -> dict:
    return {"apiVersion": BUCKET, "kind": "Bucket", "metadata": {"name": name, "namespace": prov.TEAM},
            **({"spec": spec} if spec else {})}


@pytest.mark.cluster
def test_provisioner_converges_after_sigkill_mid_work(lab: Lab) -> None:
    cloud = prov.cloud(lab)
    controller = prov.start_provisioner(lab)
    lab.apply([_bucket("k1"), _bucket("k2"), _bucket("k3", storageClass="NEARLINE")])
    # Mid-work: the cloud has accepted the creates but the buckets are still CREATING.
    lab.wait_until(lambda: all(prov.ready(prov.bucket(lab, n)).get("reason") == "Provisioning"
                               for n in ("k1", "k2", "k3")), timeout=30, message="never saw Provisioning")
    controller.kill()
    assert not controller.alive
    cloud.delete_bucket("team-a-k1")                                  # drift while nobody watches
    lab.kubectl("patch", "bucket", "k2", "-n", prov.TEAM, "--type=merge",
                "-p", '{"spec": {"storageClass": "COLDLINE"}}')       # a change while nobody watches
    lab.apply(_bucket("k4"))                                          # a new object while nobody watches
    controller.restart()
    for name in ("k1", "k2", "k3", "k4"):
        prov.wait_ready(lab, name, timeout=60)
    in_cloud = {b["name"]: b for b in cloud.list_buckets()}
    assert {f"team-a-k{i}" for i in range(1, 5)} <= set(in_cloud)
    assert in_cloud["team-a-k2"]["storageClass"] == "COLDLINE"
    assert in_cloud["team-a-k3"]["storageClass"] == "NEARLINE"
    creates = Counter(c["bucket"] for c in cloud.calls() if c["method"] == "POST" and c["status"] == 202)
    # Each bucket made once, and k1 once more after the drift: a restart never duplicates work.
    assert {n: creates[n] for n in in_cloud if n.startswith("team-a-k")} == \
        {"team-a-k1": 2, "team-a-k2": 1, "team-a-k3": 1, "team-a-k4": 1}


@pytest.mark.cluster
def test_deletion_waits_for_the_cloud_and_survives_a_kill(lab: Lab) -> None:
    cloud = prov.cloud(lab)
    controller = prov.start_provisioner(lab)
    lab.apply(_bucket("doomed"))
    prov.wait_ready(lab, "doomed", timeout=60)
    cloud.set_faults(outage=True)
    mark = len(controller.logs())
    lab.delete("bucket", "doomed", namespace=prov.TEAM, wait=False)
    # The provisioner tries, the cloud refuses, and the provisioner has handled that refusal (kopf logs
    # the release handler's TemporaryError): only then does "the finalizer keeps the object" mean anything.
    # The outage also fails the next reconcile, so only the release handler's line counts.
    lab.wait_until(lambda: any("[team-a/doomed] Handler 'release' failed temporarily" in line
                               for line in controller.logs()[mark:].splitlines()),
                   timeout=30, message="the provisioner never reported the refused cloud delete")
    assert any(c["method"] == "DELETE" and c["bucket"] == "team-a-doomed" and c["status"] == 503
               for c in cloud.calls())
    held = prov.bucket(lab, "doomed")
    assert held is not None and held["metadata"].get("deletionTimestamp")
    controller.kill()
    cloud.set_faults(outage=False)
    controller.restart()
    lab.wait_until(lambda: prov.bucket(lab, "doomed") is None, timeout=60,
                   message="the Bucket was never released after the restart")
    assert cloud.get_bucket("team-a-doomed") is None


@pytest.mark.cluster
def test_a_bucket_deleted_while_its_drift_check_waits_on_the_cloud_goes_in_seconds(lab: Lab) -> None:
    """kopf keeps a Bucket's finalizer until the Bucket's drift timer has stopped, and when the timer does not
    stop at once it looks again only after a minute by default: a Bucket deleted while its drift check was
    waiting on the cloud stayed Terminating for that minute (the composite lab's test met it on a busy
    machine). Here each drift check waits 1.8 s on the cloud, and each Bucket is deleted in the middle of
    one: the next check starts 3 s (the timer's interval) after kopf logs the last one's end."""
    cloud = prov.cloud(lab)
    controller = prov.start_provisioner(lab)
    names = ["mid-check-a", "mid-check-b"]
    for name in names:
        lab.apply(_bucket(name))
    for name in names:
        prov.wait_ready(lab, name, timeout=60)
    cloud.set_faults(latency=1.8)
    for name in names:
        mark = len(controller.logs())
        lab.wait_until(lambda n=name, m=mark: f"[team-a/{n}] Timer 'detect_drift' succeeded" in controller.logs()[m:],
                       timeout=30, interval=0.05, message=f"no drift check of {name} ended")
        time.sleep(controller_module.DRIFT_CHECK_SECONDS + 0.6)  # the next check has started, and waits on the cloud
        lab.delete("bucket", name, namespace=prov.TEAM, wait=False)
        deleted = time.monotonic()
        try:
            lab.wait_until(lambda n=name: prov.bucket(lab, n) is None, timeout=20)
        except TimeoutError:
            pytest.fail(f"Bucket {name} was still Terminating 20 s after its deletion; the provisioner's log ends:\n"
                        f"{controller.logs()[-3000:]}", pytrace=False)
        print(f"{name}: gone {time.monotonic() - deleted:.1f} s after its deletion")


@pytest.mark.cluster
def test_reconcile_stays_prompt_while_the_cloud_is_slow(lab: Lab) -> None:
    cloud = prov.cloud(lab)
    controller = prov.start_provisioner(lab)
    mark = len(controller.logs())
    # Every cloud answer takes a minute; the client gives up after 2 s. A reconcile that waited for the
    # cloud would take the minute, one that gives up takes seconds (more on a loaded machine): the bound
    # is the latency, not a speed.
    latency = 60
    cloud.set_faults(latency=latency)
    try:
        lab.apply(_bucket("slowpoke"))
        prov.wait_reason(lab, "slowpoke", "CloudUnavailable", timeout=latency)
        timing = prov.reconcile_timings(controller, since=mark)
        assert timing.seconds and max(timing.seconds) < latency, timing.seconds
    finally:
        cloud.set_faults(latency=0)
    prov.wait_ready(lab, "slowpoke", timeout=60)


@pytest.mark.cluster
def test_succinct_bucket_check_rejects_spec_fields_written_by_hand(lab: Lab) -> None:
    prov.start_provisioner(lab)
    wanted = prov.file_request(lab)  # drawn so that some of it is a default: spelling it all out is not succinct
    lab.apply(_bucket("photos", **wanted))
    prov.wait_ready(lab, "photos", timeout=60)
    with pytest.raises(CheckFailed, match="written with spec fields"):
        lab.check("succinct-bucket")
    lab.delete("bucket", "photos", namespace=prov.TEAM)
    lab.solve("succinct-bucket")
    lab.check("succinct-bucket")
