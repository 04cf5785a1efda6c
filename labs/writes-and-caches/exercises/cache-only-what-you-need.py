"""Exercise cache-only-what-you-need: the checksum controller caches the Secrets it works on, no more (G6).

The checksum controller records a checksum of the data of every Secret labelled
citizens.krmcourse.dev/cache=true. It starts with an unconfigured cache: every Secret of the cluster,
whole, 200 of 32 KiB in vault alone, to pick out the ten or so it needs. The learner writes
``cache_options()``, which the controller loads (``lab.save_code``) to decide what it lists and watches.

The check reads two things. First, the job: a labelled Secret gets new data, and the controller must
record its checksum, and those of all the other labelled Secrets. Second, the cost: the controller's own
metrics say how many Secrets and how many bytes its cache holds, and that must be close to what the
labelled Secrets weigh, not to what the whole namespace weighs.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from krmcourse import CheckFailed, KrmcourseError, Lab
from krmcourse.apiload import RestClient, mib
from krmcourse.errors import WaitTimeout

UNLABELLED = 190  # credentials-010 to credentials-199, made by wc.make_secrets
WAIT = 20  # seconds for the controller to record a changed Secret's checksum


def check(lab: Lab) -> None:
    wc = lab.support("writes_and_caches")
    rest = RestClient(lab.kubeconfig)
    try:
        _check(lab, wc, rest)
    finally:
        rest.close()


def _check(lab: Lab, wc: Any, rest: RestClient) -> None:
    bulk = wc.unlabelled_count(rest)
    if bulk < UNLABELLED:
        raise CheckFailed(
            f"Only {bulk} of the {UNLABELLED} unlabelled Secrets (credentials-010 to credentials-199) are in "
            "namespace vault. They stand for everything else a cluster holds: the cache has to leave them "
            "out, not the cluster. wc.make_secrets(rest) makes them again.")
    try:
        _, own = wc.checksummer_metrics(lab)
    except KrmcourseError:
        raise CheckFailed("The checksum controller is not running, so no checksum is kept up to date.",
                          "Run the exercise's cell: it saves your cache options and starts the controller "
                          "with them; lab.logs('checksummer') says why an earlier start stopped.") from None
    # The job: a labelled Secret changes, and its new checksum must be recorded.
    want = wc.rotate(rest)
    key = f"{wc.VAULT}.{wc.ROTATED}"  # where the controller records it: <namespace>.<name>
    try:
        lab.wait_until(lambda: wc.recorded_checksums(rest).get(key) == want, timeout=WAIT,
                       message="the checksum was not recorded")
    except WaitTimeout:
        raise CheckFailed(
            f"Secret {wc.VAULT}/{wc.ROTATED}, labelled {wc.SECRET_LABEL}=true, got new data, and within {WAIT} s "
            f"the checksum controller did not record its checksum in ConfigMap {wc.VAULT}/secret-checksums. "
            f"Its cache holds {own.total('controller_cache_objects'):.0f} Secrets "
            f"({mib(own.total('controller_cache_bytes'))} MiB): the Secrets it works on, with their data, "
            "must still be among them. Its log (lab.logs('checksummer')) says what it saw.") from None
    needed = wc.labelled_secrets(rest)
    recorded = wc.recorded_checksums(rest)
    wrong = [s["metadata"]["name"] for s in needed
             if recorded.get(wc.checksum_key(s)) != wc.checksum(s.get("data") or {})]
    if wrong:
        raise CheckFailed(f"ConfigMap {wc.VAULT}/secret-checksums has no checksum, or a wrong one, for the "
                          f"labelled Secrets {wrong}.")
    # The cost: what its cache holds now, after the change above went through it.
    _, own = wc.checksummer_metrics(lab)
    objects, held = own.total("controller_cache_objects"), own.total("controller_cache_bytes")
    needed_bytes = sum(len(json.dumps(s)) for s in needed)
    if objects > 2 * len(needed) or held > 2 * needed_bytes + 64 * 1024:
        raise CheckFailed(
            f"The checksums are right, but the checksum controller's cache holds {objects:.0f} Secrets "
            f"({mib(held)} MiB) to work on {len(needed)} labelled ones ({mib(needed_bytes)} MiB): the rest "
            "cross the network and sit in its memory for nothing.")


def solve(lab: Lab) -> None:
    def cache_options() -> dict:
        """The Secrets the checksum controller works on, with their data: the API server picks them by label."""
        return {"namespace": None, "label_selector": "citizens.krmcourse.dev/cache=true", "metadata_only": False}

    wc = lab.support("writes_and_caches")
    rest = RestClient(lab.kubeconfig)
    try:
        wc.make_secrets(rest)  # only those that are missing (an earlier try may have deleted them)
    finally:
        rest.close()
    wc.start_checksummer(lab, lab.save_code("cache-options", cache_options))


def _start_with(options: dict[str, Any]) -> Callable[[Lab], None]:
    """A learner's cache_options() that returns ``options``, saved and started as the notebook does."""
    def attempt(lab: Lab) -> None:
        wc = lab.support("writes_and_caches")
        rest = RestClient(lab.kubeconfig)
        try:
            wc.make_secrets(rest)  # the notebook has made them before the exercise
        finally:
            rest.close()
        source = f"def cache_options():\n    return {options!r}\n"
        wc.start_checksummer(lab, lab.save_code("cache-options", source))
    return attempt


def _delete_the_big_secrets(lab: Lab) -> None:
    """Start the unconfigured controller, then make its cache small by deleting what it should not hold."""
    wc = lab.support("writes_and_caches")
    wc.start_checksummer(lab)
    rest = RestClient(lab.kubeconfig)
    try:
        rest.ok("DELETE", f"/api/v1/namespaces/{wc.VAULT}/secrets", params={"labelSelector": f"!{wc.SECRET_LABEL}"})
    finally:
        rest.close()


def _stop_the_controller(lab: Lab) -> None:
    lab.stop("checksummer")


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "a label selector that matches nothing": _start_with({"label_selector": "citizens.krmcourse.dev/cache=yes"}),
    "metadata only, though it sums the data": _start_with({"metadata_only": True}),
    "only the vault namespace, still whole": _start_with({"namespace": "vault"}),
    "stop the controller": _stop_the_controller,
    "delete the unlabelled Secrets instead": _delete_the_big_secrets,
}
