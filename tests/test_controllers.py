"""The controllers lab: its Greeting controllers converge, survive crashes, re-list, and finalize.

The pure parts (work queue, conditions) are tested without a cluster; everything else runs the real
controllers as managed processes against a real lab cluster and reads the results from the API.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from krmcourse import Lab
from krmcourse.labcode import lab_module

LAB_PATH = Path(__file__).resolve().parent.parent / "labs" / "controllers"
model = lab_module("controllers", "greeter.model")
WorkQueue = lab_module("controllers", "greeter.workqueue").WorkQueue

SCRATCH = LAB_PATH / "scratch_controller.py"


# ----------------------------------------------------------------------------- pure parts


def test_workqueue_deduplicates_and_requeues_dirty_keys() -> None:
    async def scenario() -> list[tuple[str, str]]:
        queue: WorkQueue[tuple[str, str]] = WorkQueue()
        for _ in range(3):
            queue.add(("ns", "a"))
        queue.add(("ns", "b"))
        assert len(queue) == 2 and queue.deduplicated == 2
        key = await queue.get()
        queue.add(key)  # changed while a worker holds it: must not be handed to a second worker now
        assert len(queue) == 1
        queue.done(key)  # ...but comes back once the worker is done
        return [await queue.get(), await queue.get()]

    assert asyncio.run(scenario()) == [("ns", "b"), ("ns", "a")]


def test_set_condition_keeps_transition_time_unless_status_flips() -> None:
    old = [{"type": "Ready", "status": "True", "reason": "A", "message": "", "lastTransitionTime": "t0"}]
    same = model.set_condition(
        old, {"type": "Ready", "status": "True", "reason": "B", "message": "", "lastTransitionTime": "t1"}
    )
    flipped = model.set_condition(
        old, {"type": "Ready", "status": "False", "reason": "C", "message": "", "lastTransitionTime": "t2"}
    )
    assert same[0]["lastTransitionTime"] == "t0" and same[0]["reason"] == "B"
    assert flipped[0]["lastTransitionTime"] == "t2"


def test_unsupported_language_gives_a_false_condition_with_a_reason() -> None:
    greeting = {
        "metadata": {"name": "x", "namespace": "n", "generation": 3, "uid": "u"},
        "spec": {"to": "you", "language": "sp"},
    }
    message, problem = model.render(greeting)
    status = model.desired_status(greeting, message, problem)
    [ready] = status["conditions"]
    assert message is None and "sp" in problem
    assert (ready["status"], ready["reason"], status["observedGeneration"]) == ("False", "UnsupportedLanguage", 3)


# ----------------------------------------------------------------------------- against a cluster


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    lab = Lab("controllers", instance="tests").reset()
    yield lab
    lab.down()


def greetings(lab: Lab, namespace: str) -> dict[str, dict]:
    return {g["metadata"]["name"]: g for g in lab.api.get("greetings", namespace=namespace, raw=True)}


def index(lab: Lab) -> dict[str, str]:
    return (lab.get("configmap", model.INDEX_NAME, namespace=model.INDEX_NAMESPACE) or {}).get("data") or {}


def create_greetings(lab: Lab, namespace: str, names: list[str]) -> None:
    lab.kubectl("create", "namespace", namespace)
    lab.apply(
        [
            {
                "apiVersion": model.API_VERSION,
                "kind": "Greeting",
                "metadata": {"name": n, "namespace": namespace},
                "spec": {"to": n, "language": "en"},
            }
            for n in names
        ]
    )


@pytest.mark.cluster
def test_scratch_controller_converges_after_sigkill_mid_work(lab: Lab) -> None:
    names = [f"g{i}" for i in range(10)]
    create_greetings(lab, "crash", names)
    ctl = lab.run_controller(
        SCRATCH, "--namespace", "crash", "--workers", "1", "--work-delay", "0.3", name="crash-test"
    )
    lab.wait_until(
        lambda: ctl.logs().count("reconciled (") >= 3, timeout=30, message="the controller never reconciled anything"
    )
    ctl.kill()
    assert not ctl.alive
    done = [n for n, g in greetings(lab, "crash").items() if model.is_reconciled(g)]
    assert len(done) < len(names), "the kill should land mid-work, with Greetings still unreconciled"

    ctl.start()
    lab.wait_until(
        lambda: all(model.is_reconciled(g) for g in greetings(lab, "crash").values()),
        timeout=60,
        message="the restarted controller did not converge",
    )
    ctl.stop()
    configmaps = lab.api.get("configmaps", namespace="crash", label_selector=model.OWNER_LABEL, raw=True)
    owners = sorted(cm["metadata"]["ownerReferences"][0]["name"] for cm in configmaps)
    assert owners == sorted(names), "exactly one owned ConfigMap per Greeting, none duplicated"
    for greeting in greetings(lab, "crash").values():
        assert greeting["metadata"]["finalizers"].count(model.FINALIZER) == 1
        assert index(lab)[f"crash.{greeting['metadata']['name']}"] == f"Hello, {greeting['spec']['to']}!"


@pytest.mark.cluster
def test_finalizer_holds_a_deleted_greeting_until_the_controller_returns(lab: Lab) -> None:
    create_greetings(lab, "fin", ["bye"])
    ctl = lab.run_controller(SCRATCH, "--namespace", "fin", name="fin-test")
    lab.wait_until(lambda: model.is_reconciled(lab.get("greeting", "bye", namespace="fin")), timeout=30)
    ctl.stop()
    assert not ctl.alive, "only the controller may release its finalizer, and it is stopped"
    # The API server answers the DELETE only after it has set deletionTimestamp and kept the object for
    # its finalizer, and nobody else can remove that finalizer: there is nothing to wait for.
    lab.delete("greeting", "bye", namespace="fin", wait=False)
    stuck = lab.get("greeting", "bye", namespace="fin")
    assert stuck is not None and stuck["metadata"]["deletionTimestamp"]
    assert "fin.bye" in index(lab)

    ctl.start()
    lab.wait_until(
        lambda: lab.get("greeting", "bye", namespace="fin") is None,
        timeout=30,
        message="the restarted controller did not release the finalizer",
    )
    assert "fin.bye" not in index(lab)
    lab.wait_until(
        lambda: lab.get("configmap", "greeting-bye", namespace="fin") is None,
        timeout=30,
        message="garbage collection did not delete the owned ConfigMap",
    )
    ctl.stop()


@pytest.mark.cluster
def test_relists_after_watch_timeout_and_after_an_outage(lab: Lab) -> None:
    create_greetings(lab, "relist", ["before"])
    ctl = lab.run_controller(
        SCRATCH, "--namespace", "relist", "--watch-timeout", "2", "--outage", "3", name="relist-test"
    )
    ctl.wait_for_log("greetings: watch ended after", timeout=20)
    os.kill(ctl.pid or 0, signal.SIGUSR1)
    ctl.wait_for_log("greetings: watch dropped")
    during = [
        {
            "apiVersion": model.API_VERSION,
            "kind": "Greeting",
            "metadata": {"name": "during", "namespace": "relist"},
            "spec": {"to": "x"},
        }
    ]
    lab.apply(during)
    ctl.wait_for_log("greetings: reconnecting", timeout=10)
    # Everything the controller did before it reconnected, it did deaf: the new Greeting is not in it.
    deaf = ctl.logs().split("greetings: reconnecting", 1)[0]
    assert "relist/during" not in deaf, "it should be deaf while disconnected"
    lab.wait_until(
        lambda: model.is_reconciled(lab.get("greeting", "during", namespace="relist")),
        timeout=20,
        message="the re-list after the outage did not pick up the new Greeting",
    )
    after = ctl.logs().rsplit("greetings: reconnecting", 1)[1]
    assert "greetings: listed 2" in after and "(1 new" in after
    ctl.stop()


@pytest.mark.cluster
def test_kopf_controller_does_the_same_job_and_leaves_nothing_running(lab: Lab) -> None:
    proc = lab.run_kopf(LAB_PATH / "kopf_controller.py", namespace="kopf-demo", name="kopf-test")
    proc.wait_for_log("Activity 'configure' succeeded")
    lab.apply(
        {
            "apiVersion": model.API_VERSION,
            "kind": "Greeting",
            "metadata": {"name": "hi", "namespace": "kopf-demo"},
            "spec": {"to": "kopf", "language": "de"},
        }
    )
    lab.wait_until(lambda: model.is_reconciled(lab.get("greeting", "hi", namespace="kopf-demo")), timeout=30)
    configmap = lab.get("configmap", "greeting-hi", namespace="kopf-demo")
    assert configmap["data"]["message"] == "Hallo, kopf!"
    assert (
        configmap["metadata"]["ownerReferences"][0]["uid"]
        == lab.get("greeting", "hi", namespace="kopf-demo")["metadata"]["uid"]
    )
    assert index(lab)["kopf-demo.hi"] == "Hallo, kopf!"
    lab.delete("greeting", "hi", namespace="kopf-demo")
    assert "kopf-demo.hi" not in index(lab)
    pid = proc.pid
    proc.stop()
    assert not proc.alive
    # Gone, or a zombie that init has not reaped yet: a lab's processes are init's children.
    try:
        assert psutil.Process(pid or 0).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        pass
