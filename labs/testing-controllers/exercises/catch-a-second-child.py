"""Exercise: write a test that fails on the operator with the non-idempotent bug and passes on the correct one.

The check runs test_idempotent.py (saved by lab.save_code('test-idempotent', ...)) in a pytest session
of its own with the plugin's cluster, each test twice:
against the operator with GREETER_BUG=non-idempotent (it must fail), and against the correct operator (it must pass)."""

from __future__ import annotations

from collections.abc import Callable

from krmcourse import Lab
from krmcourse.labcode import lab_module

support = lab_module("testing-controllers", "testing_support")

TEST_FILE, BUG = 'test_idempotent.py', 'non-idempotent'
HINT = ('Call reconcile twice on the same Greeting, as a resync or a restart does, then count the ConfigMaps '
        "that carry the operator's label (op.LABEL) for it: there must be exactly one.")

SOLUTION = '''def test_reconcile_twice_makes_one_configmap(krm_lab, krm_api):
    import greeter_operator as op

    krm_lab.apply({"apiVersion": "controllers.krmcourse.dev/v1alpha1", "kind": "Greeting",
                   "metadata": {"name": "ada", "namespace": "default"}, "spec": {"to": "Ada"}})
    for _ in range(2):  # a second pass over the same state, as after a restart
        op.reconcile(krm_api, krm_lab.get("greeting", "ada", namespace="default"))
    owned = krm_lab.objects("configmap", "default", selector=f"{op.LABEL}=ada")
    assert [cm["metadata"]["name"] for cm in owned] == ["greeting-ada"]
    assert owned[0]["data"] == {"message": "Hello, Ada!"}
'''


def check(lab: Lab) -> None:
    support.require_catches(lab, TEST_FILE, BUG, HINT)


def solve(lab: Lab) -> None:
    lab.save_code('test-idempotent', SOLUTION)


def _only_checks_that_a_ConfigMap_exists(lab: Lab) -> None:
    lab.save_code('test-idempotent', '''def test_reconcile_makes_a_configmap(krm_lab, krm_api):
    import greeter_operator as op

    krm_lab.apply({"apiVersion": "controllers.krmcourse.dev/v1alpha1", "kind": "Greeting",
                   "metadata": {"name": "ada", "namespace": "default"}, "spec": {"to": "Ada"}})
    op.reconcile(krm_api, krm_lab.get("greeting", "ada", namespace="default"))
    assert krm_lab.objects("configmap", "default", selector=f"{op.LABEL}=ada")
''')


def _a_stand_in_for_the_api(lab: Lab) -> None:
    lab.save_code('test-idempotent', '''def test_reconcile_with_a_stand_in(krm_api):
    from unittest import mock

    import greeter_operator as op

    api = mock.MagicMock()
    op.reconcile(api, {"metadata": {"name": "ada", "namespace": "default", "uid": "1", "generation": 1,
                                    "resourceVersion": "1"}, "spec": {"to": "Ada"}})
    assert api.mock_calls
''')


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "a test that only checks that a ConfigMap exists": _only_checks_that_a_ConfigMap_exists,
    "a test that mocks the API": _a_stand_in_for_the_api,
}
