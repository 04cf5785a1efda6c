"""Reference controller for the twins lab: judge every App against the policy its policyRef names.

Run with lab.run_controller(...) and a ServiceAccount kubeconfig: it needs only read access to the
three kinds and patch on apps/status.
"""

from __future__ import annotations

from typing import Any

import kr8s
from resolution import resolve

from krmcourse.conditions import condition, merge_conditions, same_status
from krmcourse.passloop import log, objects, put_status, raw, run


def reconcile_all(api: kr8s.Api) -> None:
    """One level-triggered pass: every App gets a status that matches the policies as they are now."""

    def get(resource: str, name: str, namespace: str | None) -> dict[str, Any] | None:
        found = (
            list(api.get(resource, name, namespace=namespace))
            if namespace
            else [o for o in objects(api, resource) if o.name == name]
        )
        return raw(found[0]) if found else None

    for app in objects(api, "apps.twins.krmcourse.dev"):
        body = raw(app)
        verdict = resolve(body, get)
        old = body.get("status", {})
        cond = condition(
            "Admitted", verdict.admitted, verdict.reason, verdict.message, body["metadata"].get("generation")
        )
        new = {"policy": verdict.policy, "conditions": merge_conditions(old.get("conditions", []), [cond])}
        if not same_status(old, new):
            put_status(app, new)
            log.info(
                "App %s/%s admitted=%s reason=%s", app.namespace, app.name, verdict.admitted, verdict.reason
            )


if __name__ == "__main__":
    run(
        "policy-controller",
        reconcile_all,
        watch=[
            "apps.twins.krmcourse.dev",
            "imagepolicies.twins.krmcourse.dev",
            "clusterimagepolicies.twins.krmcourse.dev",
        ],
    )
