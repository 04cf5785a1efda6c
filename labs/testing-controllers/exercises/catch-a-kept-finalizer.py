"""Exercise: write a test that fails on the operator with the finalizer-kept bug and passes on the correct one.

The check runs test_finalizer.py (saved by lab.save_code('test-finalizer', ...)) in a pytest session
of its own with the plugin's cluster, each test twice:
against the operator with GREETER_BUG=finalizer-kept (it must fail), and against the correct operator (it must pass)."""

from __future__ import annotations

from collections.abc import Callable

from krmcourse import Lab
from krmcourse.labcode import lab_module

support = lab_module("testing-controllers", "testing_support")

TEST_FILE, BUG = 'test_finalizer.py', 'finalizer-kept'
HINT = ('Reconcile once (the finalizer goes on), delete the Greeting without waiting, reconcile what you read'
        ' back (it now has a deletionTimestamp), and check that the Greeting is gone.')

SOLUTION = '''def test_a_deleted_greeting_is_released(krm_lab, krm_api):
    import greeter_operator as op

    krm_lab.apply({"apiVersion": "controllers.krmcourse.dev/v1alpha1", "kind": "Greeting",
                   "metadata": {"name": "ada", "namespace": "default"}, "spec": {"to": "Ada"}})
    op.reconcile(krm_api, krm_lab.get("greeting", "ada", namespace="default"))
    assert op.FINALIZER in krm_lab.get("greeting", "ada", namespace="default")["metadata"]["finalizers"]
    krm_lab.delete("greeting", "ada", namespace="default", wait=False)
    op.reconcile(krm_api, krm_lab.get("greeting", "ada", namespace="default"))  # the pass that cleans up
    assert krm_lab.get("greeting", "ada", namespace="default") is None, "ada is stuck Terminating"
'''


def check(lab: Lab) -> None:
    support.require_catches(lab, TEST_FILE, BUG, HINT)


def solve(lab: Lab) -> None:
    lab.save_code('test-finalizer', SOLUTION)


def _checks_only_that_the_finalizer_is_added(lab: Lab) -> None:
    lab.save_code('test-finalizer', '''def test_the_finalizer_is_there(krm_lab, krm_api):
    import greeter_operator as op

    krm_lab.apply({"apiVersion": "controllers.krmcourse.dev/v1alpha1", "kind": "Greeting",
                   "metadata": {"name": "ada", "namespace": "default"}, "spec": {"to": "Ada"}})
    op.reconcile(krm_api, krm_lab.get("greeting", "ada", namespace="default"))
    assert op.FINALIZER in krm_lab.get("greeting", "ada", namespace="default")["metadata"]["finalizers"]
''')


def _a_stand_in_for_the_api(lab: Lab) -> None:
    lab.save_code('test-finalizer', '''def test_reconcile_with_a_stand_in(krm_api):
    from unittest import mock

    import greeter_operator as op

    api = mock.MagicMock()
    op.reconcile(api, {"metadata": {"name": "ada", "namespace": "default", "uid": "1", "generation": 1,
                                    "resourceVersion": "1"}, "spec": {"to": "Ada"}})
    assert api.mock_calls
''')


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "a test that checks only that the finalizer is added": _checks_only_that_the_finalizer_is_added,
    "a test that mocks the API": _a_stand_in_for_the_api,
}
