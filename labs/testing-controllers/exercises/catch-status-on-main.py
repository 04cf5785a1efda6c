"""Exercise: write a test that fails on the operator with the status-on-main bug and passes on the correct one.

The check runs test_status.py (saved by lab.save_code('test-status', ...)) in a pytest session
of its own with the plugin's cluster, each test twice:
against the operator with GREETER_BUG=status-on-main (it must fail), and against the correct operator (it must pass)."""

from __future__ import annotations

from collections.abc import Callable

from krmcourse import Lab
from krmcourse.labcode import lab_module

support = lab_module("testing-controllers", "testing_support")

TEST_FILE, BUG = 'test_status.py', 'status-on-main'
HINT = ('After one reconcile, read the Greeting back: metadata.generation must still be 1, and '
        'status.observedGeneration must equal it. A status sent to the main resource is not where you expect.')

SOLUTION = '''def test_status_lands_and_generation_stays(krm_lab, krm_api):
    import greeter_operator as op

    krm_lab.apply({"apiVersion": "controllers.krmcourse.dev/v1alpha1", "kind": "Greeting",
                   "metadata": {"name": "ada", "namespace": "default"}, "spec": {"to": "Ada"}})
    op.reconcile(krm_api, krm_lab.get("greeting", "ada", namespace="default"))
    after = krm_lab.get("greeting", "ada", namespace="default")
    assert after["metadata"]["generation"] == 1, "a status write must not change generation"
    assert after.get("status", {}).get("observedGeneration") == 1, f"status is {after.get('status')}"
'''


def check(lab: Lab) -> None:
    support.require_catches(lab, TEST_FILE, BUG, HINT)


def solve(lab: Lab) -> None:
    lab.save_code('test-status', SOLUTION)


def _asserts_nothing(lab: Lab) -> None:
    lab.save_code('test-status', '''def test_status(krm_lab, krm_api):
    import greeter_operator as op

    krm_lab.apply({"apiVersion": "controllers.krmcourse.dev/v1alpha1", "kind": "Greeting",
                   "metadata": {"name": "ada", "namespace": "default"}, "spec": {"to": "Ada"}})
    op.reconcile(krm_api, krm_lab.get("greeting", "ada", namespace="default"))
''')


def _a_stand_in_for_the_api(lab: Lab) -> None:
    lab.save_code('test-status', '''def test_reconcile_with_a_stand_in(krm_api):
    from unittest import mock

    import greeter_operator as op

    api = mock.MagicMock()
    op.reconcile(api, {"metadata": {"name": "ada", "namespace": "default", "uid": "1", "generation": 1,
                                    "resourceVersion": "1"}, "spec": {"to": "Ada"}})
    assert api.mock_calls
''')


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "a test that asserts nothing": _asserts_nothing,
    "a test that mocks the API": _a_stand_in_for_the_api,
}
