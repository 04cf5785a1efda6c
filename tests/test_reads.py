"""One read path: lab.get answers over the lab's HTTPS connection exactly as ``kubectl get -o json`` would."""

from __future__ import annotations

import json

import pytest

from krmcourse import Lab, probe
from krmcourse.errors import KubectlError
from krmcourse.reads import DISCOVERY, resource_names

pytestmark = pytest.mark.every_provider


def _discovery(*groups: tuple[str, list[tuple[str, list[dict]]]]) -> dict:
    return {"items": [{"metadata": {"name": g}, "versions": [{"version": v, "resources": rs} for v, rs in vs]}
                      for g, vs in groups]}


def _res(plural: str, kind: str, short: tuple[str, ...] = (), scope: str = "Namespaced") -> dict:
    return {"resource": plural, "singularResource": kind.lower(), "scope": scope,
            "responseKind": {"kind": kind}, "shortNames": list(short)}


def test_names_resolve_as_kubectl_resolves_them() -> None:
    names = resource_names(_discovery(
        ("", [("v1", [_res("events", "Event", ("ev",)), _res("nodes", "Node", ("no",), "Cluster")])]),
        ("events.k8s.io", [("v1", [_res("events", "Event", ("ev",))])]),
        ("shop.example.com", [("v2", [_res("widgets", "Widget", ("wd",))]), ("v1", [_res("widgets", "Widget")])]),
    ))
    assert names["events"].group == "" and names["ev"].group == ""  # the core group comes first
    assert names["events.events.k8s.io"].group == "events.k8s.io"
    assert not names["no"].namespaced and names["node"].plural == "nodes"
    for name in ("widget", "widgets", "wd", "widget.shop.example.com", "widgets.shop.example.com"):
        assert names[name].version == "v2", name  # the preferred (first) version
    assert names["widgets.v1.shop.example.com"].version == "v1"
    assert names["widget"].path("a b", "team") == "/apis/shop.example.com/v2/namespaces/team/widgets/a%20b"


def _kubectl_get(lab: Lab, kind: str, name: str, namespace: str | None = None) -> dict:
    return json.loads(lab.kubectl("get", kind, name, "-o", "json", *(["-n", namespace] if namespace else [])))


@pytest.mark.cluster
def test_lab_get_is_what_kubectl_shows_without_a_process_per_read(sandbox: Lab, namespace: str,
                                                                  without_kubectl) -> None:
    sandbox.kubectl("create", "configmap", "x", "-n", namespace, "--from-literal=a=b")
    cases = [("configmap", "x", namespace), ("cm", "x", namespace), ("ConfigMap", "x", namespace),
             ("apiservice", "v1.apps", None), ("ns", namespace, "ignored-for-a-cluster-scoped-kind"),
             ("node", sandbox.nodes()[0], None), ("clusterroles.rbac.authorization.k8s.io", "admin", None)]
    expected = [_kubectl_get(sandbox, *case) for case in cases]
    assert "managedFields" in sandbox.get("configmap", "x", namespace, show_managed_fields=True)["metadata"]

    with without_kubectl():
        assert [sandbox.get(*case) for case in cases] == expected
    assert sandbox.get("configmap", "absent", namespace) is None
    assert sandbox.get("crd", "absent.example.com") is None


def _kubectl_list(lab: Lab, kind: str, *flags: str) -> list[dict]:
    return json.loads(lab.kubectl("get", kind, "-o", "json", *flags))["items"]


@pytest.mark.cluster
def test_lab_objects_are_the_items_kubectl_lists_without_a_process_per_read(sandbox: Lab, namespace: str,
                                                                          without_kubectl) -> None:
    for name, team in (("a", "red"), ("b", "blue"), ("c", "red")):
        sandbox.kubectl("create", "configmap", name, "-n", namespace)
        sandbox.kubectl("label", "configmap", name, "-n", namespace, f"team={team}")
    cases = [(("configmaps", namespace), {}, ("-n", namespace)),
             (("cm", namespace), {"selector": "team=red"}, ("-n", namespace, "-l", "team=red")),
             (("configmap", namespace), {"field_selector": "metadata.name=b"},
              ("-n", namespace, "--field-selector", "metadata.name=b")),
             (("configmaps,serviceaccounts", namespace), {}, ("-n", namespace)),
             (("nodes", None), {}, ()),
             (("clusterroles.rbac.authorization.k8s.io", None), {"selector": "kubernetes.io/bootstrapping"}, ("-l",
              "kubernetes.io/bootstrapping")),
             # Other tests' namespaces may still be going away: only what this test owns, or what stays, is listed.
             (("namespaces", None), {"all_namespaces": True, "selector": "kubernetes.io/metadata.name=kube-system"},
              ("-A", "-l", "kubernetes.io/metadata.name=kube-system")),
             (("configmaps", None), {"all_namespaces": True, "selector": "team"}, ("-A", "-l", "team")),
             (("configmaps", "kube-system"), {"show_managed_fields": True}, ("-n", "kube-system",
                                                                            "--show-managed-fields")),
             (("configmaps", "no-such-namespace"), {}, ("-n", "no-such-namespace"))]
    expected = []
    for (kind, _ns), _kw, flags in cases:
        expected.append([i for k in kind.split(",") for i in _kubectl_list(sandbox, k, *flags)])
    assert [c["metadata"]["name"] for c in expected[1]] == ["a", "c"] and expected[-1] == []
    assert {i["kind"] for i in expected[3]} == {"ConfigMap", "ServiceAccount"}
    assert [c["metadata"]["name"] for c in expected[7]] == ["a", "b", "c"]
    assert any("managedFields" in i["metadata"] for i in expected[-2])
    with without_kubectl():
        got = [sandbox.objects(*args, **kw) for args, kw, _flags in cases]
    assert got == expected
    with pytest.raises(KubectlError, match="doesnotexist"):  # what only kubectl can answer goes to kubectl
        sandbox.objects("doesnotexist", namespace)


@pytest.mark.cluster
def test_several_kinds_at_once_ask_discovery_once(sandbox: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ownership tree lists every namespaced kind in one call: one look at discovery serves them all."""
    kinds = sandbox.listable_kinds()
    asked: list[str] = []
    get_fresh = probe.ApiProbe.get_fresh

    def counted(self: probe.ApiProbe, path: str, *args: object, **kwargs: object) -> object:
        asked.append(path)
        return get_fresh(self, path, *args, **kwargs)

    monkeypatch.setattr(probe.ApiProbe, "get_fresh", counted)
    assert sandbox.objects(",".join(kinds), "kube-system")
    assert asked == ["/apis"], f"{len(kinds)} kinds listed, and discovery was asked {len(asked)} times"


@pytest.mark.cluster
def test_listable_kinds_are_what_kubectl_api_resources_names(sandbox: Lab, without_kubectl) -> None:
    expected = {scope: sandbox.kubectl("api-resources", f"--namespaced={scope}", "--verbs=list", "-o", "name").split()
                for scope in ("true", "false")}
    assert "configmaps" in expected["true"] and "deployments.apps" in expected["true"]
    assert "nodes" in expected["false"] and "configmaps" not in expected["false"]
    with without_kubectl():
        got = {scope: sandbox.listable_kinds(namespaced=scope == "true") for scope in ("true", "false")}
    assert {scope: sorted(names) for scope, names in got.items()} == \
        {scope: sorted(names) for scope, names in expected.items()}


@pytest.mark.cluster
def test_a_new_kind_and_a_new_preferred_version_are_seen_at_once(sandbox: Lab, namespace: str,
                                                                 without_kubectl) -> None:
    group = f"{namespace}.example.com"
    version = {"name": "v1", "served": True, "storage": True,
               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": f"gadgets.{group}"},
           "spec": {"group": group, "scope": "Namespaced", "versions": [version],
                    "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"}}}
    assert sandbox.get("configmap", "warm-the-discovery-cache", namespace) is None
    try:
        sandbox.apply(crd)
        sandbox.wait_for(f"crd/gadgets.{group}", "condition=Established")
        sandbox.apply({"apiVersion": f"{group}/v1", "kind": "Gadget",
                       "metadata": {"name": "g", "namespace": namespace}})
        with without_kubectl():
            assert sandbox.get("gadget", "g", namespace)["apiVersion"] == f"{group}/v1"
        crd["spec"]["versions"] = [{**version, "storage": False}, {**version, "name": "v2"}]
        sandbox.apply(crd)
        sandbox.wait_until(lambda: f"{group}/v2" in sandbox.kubectl("api-versions"), timeout=30)
        shown = _kubectl_get(sandbox, "gadget", "g", namespace)
        with without_kubectl():
            assert sandbox.get("gadget", "g", namespace) == shown
        assert shown["apiVersion"] == f"{group}/v2"
    finally:
        sandbox.kubectl("delete", "crd", f"gadgets.{group}", "--wait=false")


@pytest.mark.cluster
def test_discovery_is_asked_again_cheaply(sandbox: Lab) -> None:
    """The freshness above costs a 304 per read, not the whole discovery document."""
    api = probe.for_kubeconfig(sandbox.kubeconfig)
    assert api is not None
    try:
        status, body, etag = api.get_fresh("/apis", accept=DISCOVERY, etag="")
        assert status == 200 and body and etag
        assert api.get_fresh("/apis", accept=DISCOVERY, etag=etag)[0] == 304
    finally:
        api.close()
