"""Exercise: the site recorder keeps a bounded summary in the Site's status, and the readings go elsewhere.

The check runs its own storm: 3,000 readings of about 1 KiB (twice what etcd takes in one request) from
the site's devices, through the running recorder. It then reads what the API server counted (status
updates of the Site by HTTP code), the Site's size as the API server serves it (halfway and at the end),
status.received against the readings sent, and the recorder's archive count against the same.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx

from krmcourse import CheckFailed, Lab

#: "Far below the limit": a Site this size is 1/24 of etcd's 1.5 MiB request limit.
MAX_KIB = 64
#: Growth allowed during the second half of the storm: counters gain digits, timestamps change.
MAX_GROWTH_KIB = 4


def check(lab: Lab) -> None:
    """Fail unless a storm leaves no refused write, a small Site that stops growing, and complete counts."""
    tel = lab.support("site_telemetry")
    if tel.ingest_url(lab) is None:
        raise CheckFailed("No site recorder is running, so the devices' readings reach nobody and there is "
                          "nothing to measure.",
                          "Run the exercise's cell: it saves your record() and starts the recorder with it.")
    try:
        storm = tel.storm(lab)
    except LookupError as err:  # no Site, or a recorder that never said where it listens
        raise CheckFailed(str(err), "'krmcourse reset api-anti-patterns' brings the Site back.") from None
    except httpx.HTTPError as err:  # a recorder that dies mid-storm is the learner's to see
        raise CheckFailed(f"The site recorder stopped answering during the storm ({type(err).__name__}: {err}); "
                          "lab.logs('site-recorder') shows why.") from None
    sent, kib = storm.sent, storm.bytes_after / tel.KIB
    if storm.record_failures:
        raise CheckFailed(f"The recorder's record function raised an exception on {storm.record_failures} of "
                          f"{storm.batches} batches, so those were not recorded; lab.logs('site-recorder') has "
                          "the traceback.")
    if storm.refused:
        codes = ", ".join(f"{n} with HTTP {code}" for code, n in sorted(storm.refused.items()))
        said = f" It said: {storm.messages[0]!r}." if storm.messages else ""
        raise CheckFailed(
            f"During a storm of {sent:,} readings the API server refused {sum(storm.refused.values())} updates "
            f"of the Site's status ({codes}) and accepted {storm.written}.{said} The Site is {kib:,.0f} KiB: "
            "its status still takes every reading, so it grows with every batch until the write is too large."
        )
    if kib > MAX_KIB:
        raise CheckFailed(
            f"Nothing was refused, but the Site is {kib:,.0f} KiB as the API server serves it. Every watcher "
            "and every list gets all of it again on each change, and a longer storm or more devices take it "
            f"to the limit. A summary of a site fits in well under {MAX_KIB} KiB."
        )
    growth = (storm.bytes_after - storm.bytes_halfway) / tel.KIB
    if growth > MAX_GROWTH_KIB:
        raise CheckFailed(
            f"The Site grew by {growth:,.0f} KiB during the second half of the storm (to {kib:,.0f} KiB): its "
            "status still grows with the number of readings, only more slowly, so it reaches the limit later."
        )
    counted = storm.received_after - storm.received_before
    if counted != sent:
        raise CheckFailed(f"The storm sent {sent:,} readings, but status.received went up by {counted:,}: the "
                          "summary in the status no longer tells how many readings arrived.")
    if storm.archived != sent:
        raise CheckFailed(
            f"The storm sent {sent:,} readings and the recorder's archive gained {storm.archived:,}. The rest "
            "are gone: a small status is a summary, and the readings themselves still have to be kept "
            "somewhere built for them."
        )


def solve(lab: Lab) -> None:
    """Restart the recorder with a record function that keeps a bounded summary and archives the readings."""

    def record(status, readings, archive):
        """The readings go to the archive, a database; the status keeps a summary of a fixed size."""
        archive.save(readings)
        return {
            "received": status.get("received", 0) + len(readings),
            "recent": (status.get("recent", []) + readings)[-5:],
        }

    path = lab.save_code("record", record)
    lab.start("site-recorder", "--namespace", "inventory", "--site", "harbour", "--record", str(path))


# --- what a hurried learner might try -------------------------------------------------------------------


def _with_code(lab: Lab, source: str) -> None:
    path = lab.save_code("record", source)
    lab.start("site-recorder", "--namespace", "inventory", "--site", "harbour", "--record", str(path))


def _filled_up(lab: Lab) -> None:
    """The recorder as the lab starts it, after a storm: the Site at the limit."""
    tel = lab.support("site_telemetry")
    lab.start("site-recorder")
    tel.storm(lab)


def _delete_the_history(lab: Lab) -> None:
    """Remove status.history by hand, and leave the recorder as it is."""
    tel = lab.support("site_telemetry")
    _filled_up(lab)
    lab.kubectl("patch", "site.inventory.krmcourse.dev", tel.SITE, "-n", tel.NAMESPACE, "--subresource=status",
                "--type=json", "-p", '[{"op": "remove", "path": "/status/history"}]')


def _recreate_the_site(lab: Lab) -> None:
    """Delete the full Site and create it again, empty, with the same recorder."""
    tel = lab.support("site_telemetry")
    _filled_up(lab)
    lab.delete("site.inventory.krmcourse.dev", tel.SITE, namespace=tel.NAMESPACE)
    lab.apply(lab.path / "manifests" / "40-sites.yaml")


CAPPED = '''
def record(status, readings, archive):
    """Stop adding to the history before it is too large: nothing is refused, nothing is raised."""
    history = (status.get("history", []) + readings)[:1000]
    return {"received": status.get("received", 0) + len(readings), "history": history}
'''

SUMMARY_ONLY = '''
def record(status, readings, archive):
    """A bounded status, and the readings dropped."""
    return {"received": status.get("received", 0) + len(readings),
            "recent": (status.get("recent", []) + readings)[-5:]}
'''

NEWEST_OF_EACH_BATCH = '''
def record(status, readings, archive):
    """Archive everything, and keep only the newest reading of each batch in the history."""
    archive.save(readings)
    return {"received": status.get("received", 0) + len(readings),
            "history": status.get("history", []) + readings[-1:]}
'''

#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "delete the history by hand, recorder unchanged": _delete_the_history,
    "delete and re-create the full Site, recorder unchanged": _recreate_the_site,
    "cap the history below the limit, so nothing is refused": lambda lab: _with_code(lab, CAPPED),
    "a bounded status that throws the readings away": lambda lab: _with_code(lab, SUMMARY_ONLY),
    "archive everything but keep one reading per batch in the status": lambda lab: _with_code(
        lab, NEWEST_OF_EACH_BATCH),
}
