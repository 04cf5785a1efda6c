"""Exercise: write a test that fails on the operator with the conflict-not-retried bug and passes on the correct one.

The check runs test_conflict.py (saved by lab.save_code('test-conflict', ...)) in a pytest session
of its own with the plugin's cluster, each test twice:
against the operator with GREETER_BUG=conflict-not-retried (it must fail),
and against the correct operator (it must pass)."""

from __future__ import annotations

from collections.abc import Callable

from krmcourse import Lab
from krmcourse.labcode import lab_module

support = lab_module("testing-controllers", "testing_support")

TEST_FILE, BUG = 'test_conflict.py', 'conflict-not-retried'
HINT = ("Give reconcile a stale Greeting: read it, change its spec behind the reader's back (kubectl patch), "
        'then reconcile the copy you read first. The pass must still finish, and the status must describe the'
        ' new generation.')

SOLUTION = '''def test_a_stale_read_is_retried(krm_lab, krm_api):
    import greeter_operator as op

    krm_lab.apply({"apiVersion": "controllers.krmcourse.dev/v1alpha1", "kind": "Greeting",
                   "metadata": {"name": "ada", "namespace": "default"}, "spec": {"to": "Ada"}})
    stale = krm_lab.get("greeting", "ada", namespace="default")
    krm_lab.kubectl("patch", "greeting", "ada", "-n", "default", "--type=merge", "-p", '{"spec": {"to": "Grace"}}')
    op.reconcile(krm_api, stale)  # its first write carries the old resourceVersion: 409
    after = krm_lab.get("greeting", "ada", namespace="default")
    assert after["status"]["observedGeneration"] == after["metadata"]["generation"] == 2
    assert krm_lab.get("configmap", "greeting-ada", namespace="default")["data"]["message"] == "Hello, Grace!"
'''


def check(lab: Lab) -> None:
    support.require_catches(lab, TEST_FILE, BUG, HINT)


def solve(lab: Lab) -> None:
    lab.save_code('test-conflict', SOLUTION)


def _reconciles_a_fresh_read_only(lab: Lab) -> None:
    lab.save_code('test-conflict', '''def test_reconcile_after_a_change(krm_lab, krm_api):
    import greeter_operator as op

    krm_lab.apply({"apiVersion": "controllers.krmcourse.dev/v1alpha1", "kind": "Greeting",
                   "metadata": {"name": "ada", "namespace": "default"}, "spec": {"to": "Ada"}})
    krm_lab.kubectl("patch", "greeting", "ada", "-n", "default", "--type=merge", "-p", '{"spec": {"to": "Grace"}}')
    op.reconcile(krm_api, krm_lab.get("greeting", "ada", namespace="default"))
    assert krm_lab.get("greeting", "ada", namespace="default")["status"]["observedGeneration"] == 2
''')


def _a_stand_in_for_the_api(lab: Lab) -> None:
    lab.save_code('test-conflict', '''def test_reconcile_with_a_stand_in(krm_api):
    from unittest import mock

    import greeter_operator as op

    api = mock.MagicMock()
    op.reconcile(api, {"metadata": {"name": "ada", "namespace": "default", "uid": "1", "generation": 1,
                                    "resourceVersion": "1"}, "spec": {"to": "Ada"}})
    assert api.mock_calls
''')


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "a test that reconciles a fresh read only": _reconciles_a_fresh_read_only,
    "a test that mocks the API": _a_stand_in_for_the_api,
}
