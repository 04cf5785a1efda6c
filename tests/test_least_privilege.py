"""Least privilege, measured (benchmarks/least_privilege.py): the justification file is well formed and
names real controllers, and on one lab the comparison of grants with the audit log finds nothing
unexplained, and does find an extra verb granted to the controller."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
import yaml

from krmcourse.labcode import script_module

pytestmark = pytest.mark.every_provider

ROOT = Path(__file__).resolve().parent.parent
LAB_NAME = "governor"  # the lab fixture (conftest) brings it up for the cluster test
LAB_INSTANCE = "leastpriv"


def _lp() -> ModuleType:
    return script_module(ROOT / "benchmarks" / "least_privilege.py")


def test_justification_file_is_well_formed() -> None:
    lp = _lp()
    data = lp.load_data()
    assert lp.problems_in_data(data) == []
    for c in data["controllers"]:
        # every controller named is one the lab runs: its account is defined in the lab's folder
        assert lp._sa_defined(ROOT / "labs" / c["lab"], c["serviceaccount"]), c["name"]


def test_every_controller_with_an_account_of_its_own_is_measured() -> None:
    from krmcourse import catalog

    measured = {(c["lab"], c["serviceaccount"]) for c in _lp().load_data()["controllers"]}
    declared = {(spec.name, c.serviceaccount): name for spec in catalog.all_labs()
                for name, c in spec.controllers.items() if c.serviceaccount}
    missing = [f"{lab}/{name} ({account})" for (lab, account), name in declared.items()
               if (lab, account) not in measured]
    assert not missing, ("run benchmarks/least_privilege.py for these and list them in "
                         f"benchmarks/least_privilege_justified.yaml: {', '.join(missing)}")


def test_well_formedness_check_catches_mistakes(tmp_path: Path) -> None:
    lp = _lp()
    bad = {"controllers": [
        {"name": "ghost", "lab": "no-such-lab", "notebook": "99-nothing.ipynb", "serviceaccount": "x"},
        {"name": "queue-governor", "lab": "governor", "notebook": "14-governor.ipynb",
         "serviceaccount": "shop/queue-governor",
         "justified": [{"verb": "get", "resource": "configmaps", "scope": "namespace/shop", "reason": " "},
                       {"verb": "get", "resource": "configmaps", "scope": "shop", "reason": "why"}]},
    ]}
    problems = "\n".join(lp.problems_in_data(bad))
    for expected in ("lab 'no-such-lab' does not exist", "notebook '99-nothing.ipynb' does not exist",
                     "NAMESPACE/NAME", "has no reason", "scope must be"):
        assert expected in problems


def test_a_watch_is_a_watch_however_the_log_writes_it() -> None:
    lp = _lp()
    event = {"verb": "list", "requestURI": "/apis/apps/v1/namespaces/shop/deployments?watch=true",
             "objectRef": {"resource": "deployments", "apiGroup": "apps", "namespace": "shop"},
             "annotations": {"authorization.k8s.io/decision": "allow"}}
    req = lp.request_of(event)
    assert req.verb == "watch"
    assert lp.matches(lp.Grant("watch", "apps", "deployments", "cluster"), req)
    assert not lp.matches(lp.Grant("watch", "apps", "deployments", "namespace/other"), req)
    assert not lp.matches(lp.Grant("list", "apps", "deployments", "namespace/shop"), req)
    assert lp.request_of({"verb": "get", "requestURI": "/metrics"}) is None  # non-resource URL


@pytest.mark.cluster
def test_governor_uses_all_it_is_granted_and_an_extra_verb_shows(lab) -> None:  # noqa: ANN001
    lp = _lp()
    spec = next(c for c in lp.load_data()["controllers"] if c["lab"] == "governor")
    gov = lab.support("governor_support")
    watcher = lp.Watcher(None, [lp.user_of(spec["serviceaccount"])], clusters=[(lab.audit_log, lab.kubeconfig)])

    assert gov.deploy(lab).ok
    governor = gov.start(lab)
    lab.apply(lab.path / "deployer" / "orders-scaler.yaml")
    lab.wait_until(lambda: gov.replicas(lab, "worker") == 1, timeout=30)
    gov.set_queue(lab, "orders-queue", 18)
    lab.wait_until(lambda: gov.replicas(lab, "worker") == 4, timeout=30)
    status = lambda: (lab.get("queuescaler.autoscaling.krmcourse.dev", "worker", namespace="shop")  # noqa: E731
                      .get("status") or {})
    lab.wait_until(lambda: status().get("desiredReplicas") == 4, timeout=30)
    governor.stop()
    watcher.read_audit()
    watcher.read_rbac()
    usage = lp.usage_from(watcher, spec)
    assert usage.requests, "the audit log shows no request by the governor"
    open_rows = [r for r in lp.verdicts(usage, spec) if not r["ok"]]
    assert open_rows == [], open_rows

    # A temporary copy of the governor's Role with one verb more, bound to the same account.
    role = lab.get("role", "queue-governor", namespace="shop")
    copy = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "queue-governor-extra", "namespace": "shop"},
            "rules": [{**role["rules"][0], "verbs": [*role["rules"][0]["verbs"], "delete"]}]}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "queue-governor-extra", "namespace": "shop"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "queue-governor-extra"},
               "subjects": [{"kind": "ServiceAccount", "name": "queue-governor", "namespace": "shop"}]}
    lab.apply(yaml.safe_dump_all([copy, binding]))
    try:
        watcher.read_rbac()
        open_rows = [r for r in lp.verdicts(lp.usage_from(watcher, spec), spec) if not r["ok"]]
        assert [(r["verb"], r["resource"], r["scope"], r["verdict"]) for r in open_rows] == [
            ("delete", f"{role['rules'][0]['resources'][0]}.{role['rules'][0]['apiGroups'][0]}",
             "namespace/shop", "UNEXPLAINED")]
    finally:
        lab.kubectl("delete", "rolebinding,role", "queue-governor-extra", "-n", "shop", "--ignore-not-found")
