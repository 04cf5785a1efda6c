"""Exercise: write a test that fails on the operator with the no-event bug and passes on the correct one.

The check runs test_events.py (saved by lab.save_code('test-events', ...)) in a pytest session
of its own with the plugin's cluster, each test twice:
against the operator with GREETER_BUG=no-event (it must fail), and against the correct operator (it must pass)."""

from __future__ import annotations

from collections.abc import Callable

from krmcourse import Lab
from krmcourse.labcode import lab_module

support = lab_module("testing-controllers", "testing_support")

TEST_FILE, BUG = 'test_events.py', 'no-event'
HINT = ("Run the operator with krm_controller, wait for the Greeting's Ready condition, then list the Events "
        "whose involvedObject is that Greeting (krm_lab.objects('events', ..., field_selector=...)) and "
        'assert on their reason and message.')

SOLUTION = '''def test_the_operator_tells_why_in_an_event(krm_lab, krm_controller):
    krm_controller("greeter_operator.py", ready="greeter operator ready")
    krm_lab.apply({"apiVersion": "controllers.krmcourse.dev/v1alpha1", "kind": "Greeting",
                   "metadata": {"name": "ada", "namespace": "default"}, "spec": {"to": "Ada"}})
    krm_lab.wait_for("greeting/ada", "condition=Ready", namespace="default", timeout=60)
    events = krm_lab.objects("events", "default", field_selector="involvedObject.name=ada,reason=Greeted")
    assert events, "no Greeted Event for ada"
    assert "Hello, Ada!" in events[0]["message"]
'''


def check(lab: Lab) -> None:
    support.require_catches(lab, TEST_FILE, BUG, HINT)


def solve(lab: Lab) -> None:
    lab.save_code('test-events', SOLUTION)


def _asserts_on_the_Ready_condition_only(lab: Lab) -> None:
    lab.save_code('test-events', '''def test_the_operator_makes_it_ready(krm_lab, krm_controller):
    krm_controller("greeter_operator.py", ready="greeter operator ready")
    krm_lab.apply({"apiVersion": "controllers.krmcourse.dev/v1alpha1", "kind": "Greeting",
                   "metadata": {"name": "ada", "namespace": "default"}, "spec": {"to": "Ada"}})
    krm_lab.wait_for("greeting/ada", "condition=Ready", namespace="default", timeout=60)
''')


def _a_stand_in_for_the_api(lab: Lab) -> None:
    lab.save_code('test-events', '''def test_reconcile_with_a_stand_in(krm_api):
    from unittest import mock

    import greeter_operator as op

    api = mock.MagicMock()
    op.reconcile(api, {"metadata": {"name": "ada", "namespace": "default", "uid": "1", "generation": 1,
                                    "resourceVersion": "1"}, "spec": {"to": "Ada"}})
    assert api.mock_calls
''')


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "a test that asserts on the Ready condition only": _asserts_on_the_Ready_condition_only,
    "a test that mocks the API": _a_stand_in_for_the_api,
}
