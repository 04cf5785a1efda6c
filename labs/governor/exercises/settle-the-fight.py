"""Exercise: make the deployer stop fighting the governor over spec.replicas.

The deployer applies whatever worker.yaml in the ConfigMap shop/deployer-config says. The check
reads that config and asks the API server what the deployer's next apply would do, with a
server-side dry run and no ``--force-conflicts``: it must go through without a conflict, leave
spec.replicas to others, and still manage the pod template.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import yaml

from krmcourse import CheckFailed, KubectlError, Lab

DEPLOYER = "deployer"


def _owns(fields: dict[str, Any], path: tuple[str, ...]) -> bool:
    node = fields
    for part in path:
        if f"f:{part}" not in node:
            return False
        node = node[f"f:{part}"]
    return True


def check(lab: Lab) -> None:
    source = lab.get("configmap", "deployer-config", namespace="shop")
    text = ((source or {}).get("data") or {}).get("worker.yaml")
    if not text:
        raise CheckFailed("The ConfigMap shop/deployer-config has no worker.yaml any more.")
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise CheckFailed(f"worker.yaml in shop/deployer-config is not valid YAML: {exc}") from None
    if not isinstance(config, dict) or config.get("kind") != "Deployment":
        raise CheckFailed("worker.yaml in shop/deployer-config is no longer a Deployment.")
    if "replicas" in (config.get("spec") or {}):
        raise CheckFailed(
            "The deployer's config for worker still sets spec.replicas, so every apply claims the size again: "
            "forced, it wins until the governor's next pass, and a number that agrees with the governor today "
            "only shares the field until the queue moves."
        )
    try:
        out = lab.kubectl(
            "apply",
            "--server-side",
            f"--field-manager={DEPLOYER}",
            "--dry-run=server",
            "-o",
            "json",
            "--show-managed-fields",
            "-f",
            "-",
            input=text,
        )
    except KubectlError as exc:
        raise CheckFailed(f"The deployer's next apply would fail: {exc.stderr.strip()}") from None
    entries = [
        e
        for e in json.loads(out)["metadata"].get("managedFields", [])
        if e["manager"] == DEPLOYER and e["operation"] == "Apply"
    ]
    fields = entries[0].get("fieldsV1", {}) if entries else {}
    if not _owns(fields, ("spec", "template")):
        raise CheckFailed("After its next apply the deployer would no longer manage worker's pod template.")
    if _owns(fields, ("spec", "replicas")):
        raise CheckFailed("After its next apply the deployer would still own worker's spec.replicas.")


def solve(lab: Lab) -> None:
    path = lab.path / "exercises" / "settle-the-fight.solution.yaml"
    patch = {"data": {"worker.yaml": path.read_text()}}
    lab.kubectl(
        "patch", "configmap", "deployer-config", "-n", "shop", "--type=merge", "-p", json.dumps(patch)
    )
    lab.kubectl("apply", "--server-side", f"--field-manager={DEPLOYER}", "-f", str(path))


def _governor_has_scaled_worker(lab: Lab) -> None:
    """The state the notebook reaches: the deployer created worker, then the governor scaled it through /scale."""
    gov = lab.support("governor_support")
    if gov.replicas(lab, "worker") is None:
        gov.deploy(lab)
    lab.kubectl_as(gov.SERVICE_ACCOUNT, gov.NAMESPACE, "patch", "deployment", "worker", "--subresource=scale",
                   "--type=merge", "-p", '{"spec": {"replicas": 4}}', "--field-manager=queue-governor")


def _force_the_deployer(lab: Lab) -> None:
    """Keep replicas in the config and make the deployer's apply win the conflict."""
    _governor_has_scaled_worker(lab)
    lab.support("governor_support").deploy(lab, force=True)


def _agree_with_the_governor(lab: Lab) -> None:
    """Write the governor's current size into the config, so the apply goes through without a conflict."""
    gov = lab.support("governor_support")
    _governor_has_scaled_worker(lab)
    config = yaml.safe_load(gov.deployer_config(lab))
    config["spec"]["replicas"] = gov.replicas(lab, "worker")
    patch = {"data": {"worker.yaml": yaml.safe_dump(config, sort_keys=False)}}
    lab.kubectl("patch", "configmap", "deployer-config", "-n", "shop", "--type=merge", "-p", json.dumps(patch))
    gov.deploy(lab)


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "apply with --force-conflicts": _force_the_deployer,
    "set replicas in the config to the governor's number": _agree_with_the_governor,
}
