"""Exercise noisy-neighbour: find what a client without metrics costs the API server, from the server's own (G1).

``neighbours.start_neighbour`` runs a client that sends one kind of read request, about ten a second, and
keeps no metrics: which verb and which resource are drawn for each cluster. The learner measures it the
only way left, from kube-apiserver's ``/metrics`` (two scrapes a few seconds apart, compared), and reports
``VERB resource`` in the ConfigMap ``citizens/neighbour-report``. The check grades the report against the
draw, kept beside the cluster; it needs no measurement of its own, so it answers at once. A miss says
only that it is a miss, so the table above the exercise (the widget controller's requests) or a guess
does not pass.
"""

from __future__ import annotations

from collections.abc import Callable

from krmcourse import CheckFailed, Lab, apiload

START = "Run the cell that starts it (nb.start_neighbour(lab))."


def check(lab: Lab) -> None:
    nb = lab.support("neighbours")
    drawn = nb.neighbour_draw(lab)
    if drawn is None:
        raise CheckFailed("No neighbour has been started on this cluster yet. " + START)
    report = nb.neighbour_report(lab)
    if not report:
        raise CheckFailed(f"There is no report yet: the ConfigMap {nb.NEIGHBOUR_REPORT} in {nb.NS} needs the key "
                          "'request', the verb and the resource of what the neighbour sends (for example "
                          "'PUT leases').")
    said = nb.parse_request(report)
    if said is None:
        raise CheckFailed(f"Your report says {report!r}: write a verb as kube-apiserver's metrics name it (GET, "
                          "LIST, WATCH, PATCH, ...) and a resource in its plural lower-case form, such as "
                          "'PUT leases'.")
    if said != drawn:
        raise CheckFailed(
            f"'{said[0]} {said[1]}' is not what the neighbour keeps sending. It keeps no metrics, so only "
            "kube-apiserver's count of the requests it served can tell: compare two readings of it taken a "
            "few seconds apart, and remember that the lab's own components send a steady trickle too."
        )


def solve(lab: Lab) -> None:
    import time

    nb = lab.support("neighbours")
    nb.start_neighbour(lab)
    before = apiload.scrape_apiserver(lab)
    for _ in range(30):  # until one request stands out: the neighbour sends about ten a second
        time.sleep(1)
        counts = (apiload.scrape_apiserver(lab) - before).by("apiserver_request_total", "verb", "resource")
        (verb, resource), top = max(counts.items(), key=lambda item: item[1])
        runner_up = sorted(counts.values())[-2] if len(counts) > 1 else 0
        if top >= 20 and top >= 2 * runner_up:
            break
    nb.report_neighbour(lab, f"{verb} {resource}")
    nb.stop_neighbour(lab)


# --------------------------------------------------------------------------- what a hurried learner tries
def _the_row_the_page_points_at(lab: Lab) -> None:
    """The page says to notice GET configmaps in the widget controller's table."""
    nb = lab.support("neighbours")
    nb.start_neighbour(lab)
    nb.report_neighbour(lab, "GET configmaps")


def _right_resource_other_verb(lab: Lab) -> None:
    nb = lab.support("neighbours")
    nb.start_neighbour(lab)
    verb, resource = nb.neighbour_draw(lab)
    nb.report_neighbour(lab, f"{'LIST' if verb == 'GET' else 'GET'} {resource}")


def _right_verb_other_resource(lab: Lab) -> None:
    nb = lab.support("neighbours")
    nb.start_neighbour(lab)
    verb, resource = nb.neighbour_draw(lab)
    other = next(r for v, r in sorted(nb.REQUESTS) if v == verb and r != resource)
    nb.report_neighbour(lab, f"{verb} {other}")


def _the_busiest_since_the_start(lab: Lab) -> None:
    """One reading of the counters, not two: the busiest client since the cluster came up is the lab's own."""
    nb = lab.support("neighbours")
    nb.start_neighbour(lab)
    counts = apiload.scrape_apiserver(lab).by("apiserver_request_total", "verb", "resource",
                                              resource=lambda r: r and r not in {res for _, res in nb.REQUESTS})
    verb, resource = max(counts, key=counts.__getitem__)
    nb.report_neighbour(lab, f"{verb} {resource}")


WRONG: dict[str, Callable[[Lab], None]] = {
    "the row the page points at (GET configmaps)": _the_row_the_page_points_at,
    "the right resource with the other verb": _right_resource_other_verb,
    "the right verb with another resource": _right_verb_other_resource,
    "the busiest request in one reading, since the cluster came up": _the_busiest_since_the_start,
}
