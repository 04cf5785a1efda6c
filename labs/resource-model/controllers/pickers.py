"""Four pickers fill one basket at once, each through the learner's ``add_one(raw, path)``.

Run by the lab as the ``pickers`` controller: ``lab.start("pickers", "--code", str(path))``, where the
path comes from ``lab.save_code("add-one", add_one)``. It empties the basket, runs the harvest (see
krm_harvest: every round, all pickers read before any writes), records what it did in the ConfigMap
``harvest-report``, logs ``harvest done`` and then waits, so that a later start with the same code
adopts it instead of picking again.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from krmcourse.controllerkit import log
from krmcourse.labcode import lab_module, saved_function

LAB = Path(__file__).resolve().parent.parent
wire = lab_module("resource-model", "krm_wire", LAB)
harvest = lab_module("resource-model", "krm_harvest", LAB)

#: A call of add_one that sends more requests than this is stopped: it would never end.
MAX_REQUESTS = 60


class Picker:
    """The client one picker hands to add_one: a RawClient whose first read in a round waits for the others."""

    def __init__(self, raw: Any) -> None:
        self._raw = raw
        self.conflicts = 0
        self._barrier: threading.Barrier | None = None
        self._requests = 0
        self.apart = False  # this round, the others had not all read within harvest.BARRIER_SECONDS

    def begin(self, barrier: threading.Barrier) -> None:
        self._barrier, self._requests, self.apart = barrier, 0, False

    def arrive(self) -> None:
        """Say "I have read" once per round; the first read of every picker returns only when all have read."""
        barrier, self._barrier = self._barrier, None
        if barrier is not None:
            try:
                barrier.wait(timeout=harvest.BARRIER_SECONDS)
            except threading.BrokenBarrierError:
                self.apart = True

    def request(self, method: str, path: str, *args: Any, **kwargs: Any) -> Any:
        self._requests += 1
        if self._requests > MAX_REQUESTS:
            raise RuntimeError(f"add_one sent more than {MAX_REQUESTS} requests for one tomato; stopped it")
        reply = self._raw.request(method, path, *args, **kwargs)
        if reply.status == 409 and method in ("PUT", "PATCH"):
            self.conflicts += 1
        if method == "GET":
            self.arrive()
        return reply

    def get(self, path: str, params: dict[str, str] | None = None) -> Any:
        return self.request("GET", path, params=params)

    def put(self, path: str, body: dict[str, Any]) -> Any:
        return self.request("PUT", path, body)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)


def empty_the_basket(admin: Any) -> None:
    admin.delete(harvest.REPORT_PATH)
    basket = {"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": harvest.BASKET, "namespace": harvest.NAMESPACE}, "data": {harvest.KEY: "0"}}
    if admin.get(harvest.BASKET_PATH).status == 404:
        created = admin.request("POST", f"/api/v1/namespaces/{harvest.NAMESPACE}/configmaps", basket)
        if created.status >= 300:
            raise RuntimeError(f"could not create the basket: {created.status} {created.message}")
        return
    for _ in range(10):
        current = admin.get(harvest.BASKET_PATH).body
        current["data"] = {harvest.KEY: "0"}
        if admin.put(harvest.BASKET_PATH, current).status == 200:
            return
    raise RuntimeError("could not empty the basket")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--code", required=True, help="a file that defines add_one(raw, path)")
    args = parser.parse_args()
    kubeconfig = Path(os.environ["KUBECONFIG"])
    admin = wire.RawClient(kubeconfig, user_agent=f"{harvest.HARNESS}/1")
    try:
        add_one, problem = saved_function(Path(args.code), "add_one"), ""
    except SystemExit as exc:  # reported with the picking errors below, as the check expects
        add_one, problem = None, str(exc)
    empty_the_basket(admin)
    before = harvest.conflicts(admin.get("/metrics").body.get("text", ""))
    pickers = [Picker(wire.RawClient(kubeconfig, user_agent=f"picker-{n}/1")) for n in range(harvest.PICKERS)]
    errors: list[str] = []
    if add_one is None:
        errors.append(problem)

    def pick(picker: Picker) -> None:
        try:
            add_one(picker, harvest.BASKET_PATH)
        except Exception as exc:  # the learner's code: report it, keep picking
            errors.append("".join(traceback.format_exception_only(exc)).strip())
        finally:
            picker.arrive()  # a picker that never read must not hold up the others

    rounds_apart = 0
    with ThreadPoolExecutor(harvest.PICKERS) as pool:
        for round_ in range(harvest.ROUNDS if add_one else 0):
            barrier = threading.Barrier(harvest.PICKERS)
            for picker in pickers:
                picker.begin(barrier)
            list(pool.map(pick, pickers))
            if any(p.apart for p in pickers):
                rounds_apart += 1
                log(f"round {round_ + 1}: the pickers did not all read before one wrote; the harvest stops")
                break
            log(f"round {round_ + 1}: the basket holds", admin.get(harvest.BASKET_PATH).body.get("data"))
    expected = harvest.PICKERS * harvest.ROUNDS
    seen = sum(p.conflicts for p in pickers)
    basket = admin.get(harvest.BASKET_PATH).body
    # The basket as the harvest left it: a later hand edit changes its resourceVersion, which the check sees.
    record = {"pickers": harvest.PICKERS, "rounds": harvest.ROUNDS, "expected": expected,
              "conflictsBefore": before, "conflictsSeen": seen, "errors": errors[:3], "roundsApart": rounds_apart,
              "basketVersion": basket.get("metadata", {}).get("resourceVersion")}
    admin.request("POST", f"/api/v1/namespaces/{harvest.NAMESPACE}/configmaps", {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": harvest.REPORT, "namespace": harvest.NAMESPACE},
        "data": {k: json.dumps(v) for k, v in record.items()}})
    count = basket.get("data", {}).get(harvest.KEY)
    for error in errors[:3]:
        log("add_one failed:", error)
    log(f"harvest done: {expected} tomatoes picked, the basket holds {count}; the pickers met {seen} conflicts")
    threading.Event().wait()


if __name__ == "__main__":
    main()
