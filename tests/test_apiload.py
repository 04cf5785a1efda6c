"""krmcourse.apiload: parsing and diffing Prometheus text, and measuring a real API server.

The unit tests feed the parser text in the exposition format; the cluster tests measure requests
that the test itself sends, so the expected counts are known without hard-coding any server figure.
"""

from __future__ import annotations

import json

import pytest

from krmcourse import apiload
from krmcourse.errors import KrmcourseError

LAB_NAME = "good-citizens"  # the lab fixture (conftest) brings it up for this module
LAB_INSTANCE = "apiload-tests"

SCRAPE_1 = """\
# HELP apiserver_request_total Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",resource="widgets",subresource="",verb="LIST"} 3
apiserver_request_total{code="200",resource="widgets",subresource="status",verb="PATCH"} 5
apiserver_request_total{code="200",resource="configmaps",subresource="",verb="GET"} 7
apiserver_longrunning_requests{resource="widgets",scope="namespace",verb="WATCH"} 2
other_family{a="b"} 9
label_with_escapes{path="a\\"b\\\\c"} 1
"""

SCRAPE_2 = SCRAPE_1.replace('verb="LIST"} 3', 'verb="LIST"} 10').replace('verb="GET"} 7', 'verb="GET"} 8')


def test_parse_keeps_only_the_named_families() -> None:
    metrics = apiload.Metrics.parse(SCRAPE_1, ["apiserver_request_total"])
    assert metrics.names() == {"apiserver_request_total"}
    assert metrics.total("apiserver_request_total") == 15


def test_parse_unescapes_label_values() -> None:
    metrics = apiload.Metrics.parse(SCRAPE_1)
    labels, value = next(metrics.series("label_with_escapes"))
    assert labels["path"] == 'a"b\\c' and value == 1


def test_matching_by_value_set_and_predicate() -> None:
    metrics = apiload.Metrics.parse(SCRAPE_1)
    assert metrics.total("apiserver_request_total", verb="LIST") == 3
    assert metrics.total("apiserver_request_total", verb=("LIST", "GET")) == 10
    assert metrics.total("apiserver_request_total", resource=lambda r: r.startswith("w")) == 8
    assert metrics.by("apiserver_request_total", "resource") == {("widgets",): 8, ("configmaps",): 7}


def test_difference_of_two_scrapes() -> None:
    delta = apiload.Metrics.parse(SCRAPE_2) - apiload.Metrics.parse(SCRAPE_1)
    assert delta.total("apiserver_request_total", verb="LIST") == 7
    assert delta.total("apiserver_request_total", verb="GET") == 1
    assert delta.total("apiserver_request_total", verb="PATCH") == 0


@pytest.mark.parametrize(("method", "path", "ctype", "params", "key"), [
    ("GET", "/api/v1/namespaces/a/configmaps", "application/json", None, ("LIST", "configmaps", "")),
    ("GET", "/api/v1/namespaces/a/configmaps/x", "application/json", None, ("GET", "configmaps", "")),
    ("GET", "/apis/g.io/v1/namespaces/a/widgets", "application/json", {"watch": "true"}, ("WATCH", "widgets", "")),
    ("PATCH", "/apis/g.io/v1/namespaces/a/widgets/x/status", apiload.SSA, None, ("APPLY", "widgets", "status")),
    ("PUT", "/apis/g.io/v1/widgets/x", "application/json", None, ("PUT", "widgets", "")),
    ("POST", "/api/v1/namespaces", "application/json", None, ("POST", "namespaces", "")),
])
def test_metric_key_matches_the_api_servers_labels(method: str, path: str, ctype: str, params: dict | None,
                                                   key: tuple[str, str, str]) -> None:
    assert apiload.metric_key(method, path, ctype, params) == key


def test_ratio_and_table() -> None:
    assert apiload.ratio(10, 2) == 5
    assert apiload.ratio(3, 0) == 3  # nothing used counts as one, never a division by zero
    with pytest.raises(ValueError):
        apiload.ratio(-1, 1)
    table = apiload.table({"bad": {"requests": 10}, "good": {"requests": 2}})
    assert apiload.Comparison("t", table).ratio("requests", "bad", "good") == 5


def test_measure_needs_a_resource_and_a_finished_block() -> None:
    with pytest.raises(KrmcourseError, match="at least one resource"), apiload.measure(object()):
        pass
    with pytest.raises(KrmcourseError, match="not finished"):
        apiload.ApiLoad(("widgets",)).requests()


def test_metrics_url_reports_a_controller_that_died() -> None:
    class Dead:
        alive = False

        def logs(self) -> str:
            return "Traceback: boom"

    with pytest.raises(KrmcourseError, match="did not print its metrics URL"):
        apiload.metrics_url(Dead(), timeout=1)


# --------------------------------------------------------------------------- against a real API server
@pytest.mark.cluster
def test_measure_counts_exactly_the_requests_sent(lab) -> None:  # noqa: ANN001
    # Of a kind only this test reads: the control plane reads ConfigMaps of its own now and then (a
    # kube-controller-manager just started reads one of kube-system), which an exact count would meet.
    widget = "/apis/citizens.krmcourse.dev/v1/namespaces/default/widgets"
    rest = apiload.RestClient(lab.kubeconfig)
    try:
        rest.ok("POST", widget, {"apiVersion": "citizens.krmcourse.dev/v1", "kind": "Widget",
                                 "metadata": {"name": "counted"}, "spec": {}})
        with apiload.measure(lab, "widgets") as load:
            for _ in range(3):
                rest.ok("GET", f"{widget}/counted")
        with apiload.measure(lab, "widgets", observer=rest) as own_left_out:
            for _ in range(3):
                rest.ok("GET", f"{widget}/counted")
        rest.ok("DELETE", f"{widget}/counted")
    finally:
        rest.close()
    assert load.requests(verb="GET", resource="widgets") == 3
    assert load.response_bytes(verb="GET") > 0
    assert own_left_out.requests(verb="GET", resource="widgets") == 0


@pytest.mark.cluster
def test_open_watches_follow_a_real_watch(lab) -> None:  # noqa: ANN001
    import httpx

    rest = apiload.RestClient(lab.kubeconfig)
    try:
        before = apiload.open_watches(lab, "secrets")["secrets"]
        with rest.http.stream("GET", "/api/v1/namespaces/default/secrets", params={"watch": "true"}):
            during = lab.wait_until(lambda: apiload.open_watches(lab, "secrets")["secrets"] > before and 1)
            assert during
        after = lab.wait_until(lambda: apiload.open_watches(lab, "secrets")["secrets"] == before or None,
                               timeout=10)
        assert after
    except httpx.HTTPError as exc:  # pragma: no cover - surfaced with the server's words
        pytest.fail(f"watch failed: {exc}")
    finally:
        rest.close()


@pytest.mark.cluster
def test_a_controller_and_the_api_server_agree(lab) -> None:  # noqa: ANN001
    """The G1 claim, in small: the controller's own counter equals kube-apiserver's, verb by verb."""
    gc = lab.support("good_citizens")

    rest = apiload.RestClient(lab.kubeconfig)
    try:
        table = gc.compare_first_line(lab, rest, n=3)
    finally:
        rest.close()
    rows = json.loads(table.to_json(orient="records"))
    assert rows, "the controller made no requests"
    for row in rows:
        if row["verb"] != "WATCH":
            assert row["controller says"] == row["kube-apiserver says"], row
