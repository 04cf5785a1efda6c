"""Exercise: give the Server controller a Registering/Inspecting step that returns promptly.

The step is a function the learner saves with ``lab.save_code`` and the controller runs in its one
worker. The check never imports it: it creates four Servers in one request and measures what happened.

* All four reach Provisioned, and the controller's own ``status.operationHistory`` shows that each
  passed through Inspecting (the intermediate state was written, not skipped).
* Each Server's hardware is the metal service's own record for its host (its serial number), so the
  result was read from the slow system, not written by hand.
* No reconcile was still running when an inspection it had seen under way ended, and no step held the
  worker for over 1.5 s (the controller's counters ``server_controller_reconciles_waited`` and
  ``server_controller_slow_steps``): nothing blocked the worker for the slow work.
* The load stayed bounded: the controller's reconcile counter, and the status writes that
  kube-apiserver counted for servers (``apiserver_request_total``), with wide margins per Server.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from typing import Any

from krmcourse import CheckFailed, Lab
from krmcourse.apiload import measure
from krmcourse.errors import WaitTimeout

SERVERS = 4
#: A prompt step needs about a dozen reconciles and four status writes per Server; a hot loop needs
#: hundreds or thousands while a host is being inspected.
MAX_RECONCILES_PER_SERVER = 25
MAX_STATUS_WRITES_PER_SERVER = 10
TIMEOUT = 150


def _measure_run(lab: Lab, si: Any) -> tuple[dict[str, dict[str, Any]], float, float, int]:
    """Create the Servers in one request, wait until they are finished, and read the counters around it."""
    names = [f"rp-{secrets.token_hex(2)}-{i}" for i in range(1, SERVERS + 1)]
    before = si.controller_metrics(lab)
    try:
        with measure(lab, "servers") as load:
            si.create_servers(lab, names)
            try:
                found = si.wait_finished(lab, names, timeout=TIMEOUT)
            except WaitTimeout:
                raise CheckFailed(_stuck(lab, si, names)) from None
        after = si.controller_metrics(lab) - before
    finally:
        si.delete_servers(lab, names)
    waited = (after.total("server_controller_reconciles_waited_total")
              + after.total("server_controller_slow_steps_total"))
    return (found, after.total("controller_reconciles_total", loop="servers"),
            waited, load.requests(verb="PATCH", subresource="status"))


def _stuck(lab: Lab, si: Any, names: list[str]) -> str:
    found = si.servers(lab, names)
    states = {n: found.get(n, {}).get("status", {}).get("state") or "(no state)" for n in names}
    waiting = [n for n, s in states.items() if s == "Inspecting"]
    metal = si.running_metal_service(lab)
    done = [n for n in waiting if metal and (metal.host(f"{si.NAMESPACE}.{n}") or {}).get("state") == "inspected"]
    text = (f"{SERVERS} Servers created together were not all Provisioned after {TIMEOUT} s: "
            + ", ".join(f"{n} {s}" for n, s in states.items()) + ".")
    if done:
        text += (" The metal service finished inspecting their hosts long ago, but nothing brought the"
                 " controller back to the Servers still Inspecting.")
    return text + " The controller's log says what its reconciles did (lab.logs('server-controller'))."


def check(lab: Lab) -> None:
    """Fail unless Servers created together all finish, through Inspecting, without a waiting or hot reconcile."""
    si = lab.support("slowinfra")
    if si.CONTROLLER not in lab.running():
        raise CheckFailed("The server controller is not running, so nothing acts on new Servers.",
                          "Run the exercise's cell: it saves your step and starts the controller with it.")
    metal = si.running_metal_service(lab)
    if metal is None:
        raise CheckFailed("The metal service is not running, so no host can be registered or inspected.",
                          "Run the exercise's cell again: it starts the metal service before the controller.")
    found, reconciles, waited, writes = _measure_run(lab, si)
    states = {n: o["status"].get("state") for n, o in found.items()}
    if set(states.values()) != {"Provisioned"}:
        raise CheckFailed(f"Not every Server was Provisioned: {states}.")
    skipped = sorted(n for n, o in found.items() if "inspect" not in o["status"].get("operationHistory", {}))
    if skipped:
        raise CheckFailed(f"{', '.join(skipped)} went from Registering straight to Provisioning: their status "
                          "never said Inspecting, so for the whole inspection nobody could see what was going on.")
    for name, obj in sorted(found.items()):
        host = metal.host(f"{si.NAMESPACE}.{name}") or {}
        if host.get("state") != "inspected" or obj["status"].get("hardware") != host.get("hardware"):
            raise CheckFailed(f"{name}'s status gives hardware {json.dumps(obj['status'].get('hardware'))}, but "
                              f"the metal service's record of its host is {json.dumps(host.get('hardware'))}: "
                              "the result of the inspection did not come from the metal service.")
    if waited:
        raise CheckFailed(f"{waited:.0f} times a reconcile held the one worker while an inspection went on (it was "
                          "still running when the inspection ended, or its step took over 1.5 s): it waited for "
                          "the slow work, and meanwhile no other Server was served.",
                          "Let the step start the inspection, say so in status, and return with requeue_after; "
                          "lab.logs('server-controller') names the reconciles that waited.")
    if reconciles > MAX_RECONCILES_PER_SERVER * SERVERS:
        raise CheckFailed(f"The controller ran {reconciles:.0f} reconciles for {SERVERS} Servers (a prompt step "
                          f"needs a few dozen): it came back to Servers still being inspected again and again.")
    if writes > MAX_STATUS_WRITES_PER_SERVER * SERVERS:
        raise CheckFailed(f"kube-apiserver received {writes} status writes for {SERVERS} Servers (a prompt step "
                          "needs four per Server): the controller wrote the same status again and again.")


def solve(lab: Lab) -> None:
    """Give the controller a step that starts the inspection, says so in status, and comes back later."""

    def reconcile(server, metal):
        status = server["status"]
        if status["state"] == "Registering":
            host = metal.register(server)  # quick, and safe to repeat
            metal.inspect(host)  # start the slow work...
            return {"status": {"state": "Inspecting", "hostID": host},  # ...say so in status...
                    "requeue_after": 5}  # ...and come back in 5 s (a real controller: in minutes)
        found = metal.host(status["hostID"])
        if found["state"] != "inspected":
            return {"requeue_after": 5}  # still inspecting: look again later
        return {"status": {"state": "Provisioning", "hardware": found["hardware"]}}

    si = lab.support("slowinfra")
    path = lab.save_code(si.STEP, reconcile)
    si.start_controller(lab, si.start_metal_service(lab), path)


def _run_step(lab: Lab, step: Callable[..., dict]) -> None:
    si = lab.support("slowinfra")
    si.start_controller(lab, si.start_metal_service(lab), lab.save_code(si.STEP, step))


def _wait_inside_the_reconcile(lab: Lab) -> None:
    """The notebook's starting step: register, inspect, and wait for the inspection to end."""

    def reconcile(server, metal):
        host = metal.register(server)
        metal.inspect(host)
        hardware = metal.wait_for_inspection(host)
        return {"status": {"state": "Provisioning", "hostID": host, "hardware": hardware}}

    _run_step(lab, reconcile)


def _sleep_then_look_once(lab: Lab) -> None:
    """Inspecting is written promptly; the next reconcile sleeps as long as an inspection takes, then looks
    once: the worker is held just as long, though the metal service never sees it wait."""

    def reconcile(server, metal):
        import time

        status = server["status"]
        if status["state"] == "Registering":
            host = metal.register(server)
            metal.inspect(host)
            return {"status": {"state": "Inspecting", "hostID": host}}
        time.sleep(3.5)
        found = metal.host(status["hostID"])
        if found["state"] != "inspected":
            return {"requeue_after": 1}
        return {"status": {"state": "Provisioning", "hardware": found["hardware"]}}

    _run_step(lab, reconcile)


def _say_inspecting_then_wait(lab: Lab) -> None:
    """Inspecting is written promptly, but the next reconcile waits for the inspection to end."""

    def reconcile(server, metal):
        status = server["status"]
        if status["state"] == "Registering":
            host = metal.register(server)
            metal.inspect(host)
            return {"status": {"state": "Inspecting", "hostID": host}}
        return {"status": {"state": "Provisioning", "hardware": metal.wait_for_inspection(status["hostID"])}}

    _run_step(lab, reconcile)


def _come_back_at_once(lab: Lab) -> None:
    """Prompt, but it asks to be called again with no delay: a hot loop while the host is inspected."""

    def reconcile(server, metal):
        status = server["status"]
        if status["state"] == "Registering":
            host = metal.register(server)
            metal.inspect(host)
            return {"status": {"state": "Inspecting", "hostID": host}, "requeue_after": 0}
        found = metal.host(status["hostID"])
        if found["state"] != "inspected":
            return {"requeue_after": 0}
        return {"status": {"state": "Provisioning", "hardware": found["hardware"]}}

    _run_step(lab, reconcile)


def _write_the_result_by_hand(lab: Lab) -> None:
    """Prompt, but the final status is typed in: Provisioning, with the hardware the learner expects."""

    def reconcile(server, metal):
        status = server["status"]
        if status["state"] == "Registering":
            host = metal.register(server)
            metal.inspect(host)
            return {"status": {"state": "Inspecting", "hostID": host}, "requeue_after": 5}
        return {"status": {"state": "Provisioning", "hardware": {"cpus": 16, "memoryGiB": 64}}}

    _run_step(lab, reconcile)


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "wait for the inspection inside the reconcile": _wait_inside_the_reconcile,
    "say Inspecting, then wait in the next reconcile": _say_inspecting_then_wait,
    "say Inspecting, then sleep before looking once": _sleep_then_look_once,
    "requeue with no delay (a hot loop)": _come_back_at_once,
    "write the final status by hand": _write_the_result_by_hand,
}
