"""Exercise who-serves-it: tell the CRD-served groups from the aggregated one, and unregister the dead server (C1).

``extensions.open_extensions`` registers three API groups with names drawn for each opening: two come from
CRDs, one is an APIService that hands its group to a Service nobody serves. Nothing on the page says which
is which. The learner reads the cluster (APIServices, CRDs, discovery), reports in the ConfigMap
``store/extension-report`` which group a server of its own must serve and the reason the aggregator gives
for its being unavailable, and then takes that registration out of the API, so that discovery is whole
again for every client. The two CRD-served groups must stay.

The truth is the opening's record, beside the cluster: the report is graded against it, so a report made
after the registration is gone still counts, and the reason (which depends on the draw) cannot be guessed
from the page.
"""

from __future__ import annotations

from collections.abc import Callable

from krmcourse import CheckFailed, Lab

OPEN = "Run the cell that opens them (ext = lab.support('extensions'); ext.open_extensions(lab))."


def check(lab: Lab) -> None:
    ext = lab.support("extensions")
    found = ext.extensions(lab)
    if found is None:
        raise CheckFailed("No extra API groups are registered in this cluster yet. " + OPEN)
    gone = [g for g in found.crd_groups if lab.get("customresourcedefinition", found.crd_name(g)) is None]
    if gone:
        raise CheckFailed(f"Group {gone[0]} is no longer served. kube-apiserver served it from a CRD and nothing "
                          "was wrong with it. Open the groups again, with fresh=True, and take away only what "
                          "no server answers for.")
    report = ext.read_report(lab)
    if report is None or not report.get("aggregated") or not report.get("reason"):
        raise CheckFailed(f"There is no report yet: the ConfigMap {ext.REPORT} in {ext.NAMESPACE} needs two keys, "
                          "'aggregated' (the group a server of its own must serve) and 'reason' (why the API "
                          "server says that group is unavailable).")
    named = ext.group_of(report["aggregated"])
    if named in found.crd_groups:
        raise CheckFailed(f"Your report names {named}, but kube-apiserver serves that group itself, from a CRD. "
                          "Each group has an APIService: compare what they say about who serves them.")
    if named != found.aggregated:
        raise CheckFailed(f"Your report names {named!r}, which is not one of the three groups opened here "
                          f"({', '.join(found.groups)}).")
    if report["reason"].lower() != found.reason.lower():
        raise CheckFailed(f"{found.aggregated} is the aggregated group, but {report['reason']!r} is not the reason "
                          "the API server gave for its being unavailable. Its APIService's status holds the "
                          "conditions the aggregator wrote. (If you have already unregistered it, open the "
                          "groups again with fresh=True.)")
    if lab.get("apiservice", ext.apiservice_name(found.aggregated)) is not None:
        raise CheckFailed(f"Your report is right, and {found.aggregated} is still registered. Nothing serves it: "
                          "every request for it fails, discovery marks it stale, and no namespace can finish "
                          "being deleted, because the namespace controller must list every kind in it first. "
                          "The Service behind it is only an address; the registration is what puts the group in "
                          "the API.")
    for group in found.crd_groups:
        if lab.get("apiservice", ext.apiservice_name(group)) is None:
            raise CheckFailed(f"Group {group} has no APIService right now, although its CRD is there; kube-apiserver "
                              "registers it again on its own within a few seconds. Run the check again.")


def solve(lab: Lab) -> None:
    ext = lab.support("extensions")
    found = ext.open_extensions(lab)
    if not ext.intact(lab, found):  # changed before its reason was read: a new opening
        found = ext.open_extensions(lab, fresh=True)
    for group in found.groups:  # only what the learner is shown: the group names
        service = lab.get("apiservice", ext.apiservice_name(group))
        if service and service["spec"].get("service"):  # an aggregated group names the Service that serves it
            available = next(c for c in service["status"]["conditions"] if c["type"] == "Available")
            ext.report(lab, group, available["reason"])
            lab.kubectl("delete", "apiservice", service["metadata"]["name"])


# --------------------------------------------------------------------------- what a hurried learner tries
def _everything_local(lab: Lab) -> None:
    """The page's table showed every group as Local: report the first group, with reason Local."""
    ext = lab.support("extensions")
    found = ext.open_extensions(lab)
    ext.report(lab, found.groups[0] if found.groups[0] != found.aggregated else found.groups[1], "Local")


def _report_only(lab: Lab) -> None:
    """A right report, and the dead registration left in place."""
    ext = lab.support("extensions")
    found = ext.open_extensions(lab)
    ext.report(lab, found.aggregated, found.reason)


def _delete_the_service(lab: Lab) -> None:
    """A right report, then the Service taken away instead of the registration."""
    ext = lab.support("extensions")
    found = ext.open_extensions(lab)
    ext.report(lab, ext.apiservice_name(found.aggregated), found.reason)
    namespace, name = found.service.split("/")
    lab.kubectl("delete", "service", name, "-n", namespace, "--ignore-not-found")


def _the_other_reason(lab: Lab) -> None:
    """The right group, unregistered, with a reason guessed rather than read."""
    ext = lab.support("extensions")
    found = ext.open_extensions(lab, fresh=True)
    guess = "MissingEndpoints" if found.reason == "ServiceNotFound" else "ServiceNotFound"
    ext.report(lab, found.aggregated, guess)
    lab.kubectl("delete", "apiservice", ext.apiservice_name(found.aggregated))


def _unregister_all_three(lab: Lab) -> None:
    """A right report, then all three groups taken out of the API, CRDs and all."""
    ext = lab.support("extensions")
    found = ext.open_extensions(lab, fresh=True)
    ext.report(lab, found.aggregated, found.reason)
    lab.kubectl("delete", "apiservice", ext.apiservice_name(found.aggregated))
    for group in found.crd_groups:
        lab.kubectl("delete", "customresourcedefinition", found.crd_name(group))


WRONG: dict[str, Callable[[Lab], None]] = {
    "the page's answer: every group is Local": _everything_local,
    "a right report, and the dead registration left in place": _report_only,
    "a right report, then the Service deleted instead of the APIService": _delete_the_service,
    "the right group unregistered, with a reason guessed, not read": _the_other_reason,
    "a right report, then all three groups unregistered, CRDs included": _unregister_all_three,
}
