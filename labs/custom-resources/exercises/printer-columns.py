"""Exercise: make ``kubectl get memorystores`` show each MemoryStore's engine and size.

The check reads the CRD's additionalPrinterColumns for every served version (kubectl uses the
version discovery prefers, which changes when a version is added), then asks kubectl itself and
looks for the engine of a known MemoryStore in its table: a column that points at the wrong field, or one
with a priority above 0 (which only ``-o wide`` shows), does not count.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from krmcourse import CheckFailed, Lab

COLUMNS = [
    {"name": "Engine", "type": "string", "jsonPath": ".spec.engine"},
    {"name": "Size", "type": "integer", "jsonPath": ".spec.sizeGi", "description": "Memory in GiB"},
    {"name": "Ready", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


def check(lab: Lab) -> None:
    c = lab.support("memorystore_crd")
    for version, paths in c.printer_columns(lab).items():
        wanted = {".spec.engine": "the engine", ".spec.sizeGi": "the size"}
        absent = [what for path, what in wanted.items() if path not in paths]
        if absent:
            read = (f" Its columns read {', '.join(paths)}: compare them with where a MemoryStore keeps its fields "
                    "(kubectl get memorystore sessions -o yaml).") if paths else ""
            raise CheckFailed(
                f"Version {version} of the MemoryStore CRD declares no column for {' or '.join(absent)}.{read}"
            )
    table = lab.kubectl("get", "memorystores", "-n", c.NAMESPACE)
    if "memcached" not in table:
        columns = [col for v in c.crd(lab)["spec"]["versions"] for col in v.get("additionalPrinterColumns", [])]
        wide = sorted({col["name"] for col in columns if col.get("priority", 0) > 0})
        raise CheckFailed(
            "kubectl get memorystores does not show the memcached engine of the MemoryStore sessions yet"
            + (f": the columns {', '.join(wide)} have a priority above 0, so only -o wide shows them." if wide else ".")
        )


def solve(lab: Lab) -> None:
    c = lab.support("memorystore_crd")
    c.patch_crd(
        lab,
        c.for_every_version(
            lab,
            lambda i, _: {
                "op": "add",
                "path": f"/spec/versions/{i}/additionalPrinterColumns",
                "value": COLUMNS,
            },
        ),
    )
    c.settle(
        lab, lambda: "memcached" in lab.kubectl("get", "memorystores", "-n", c.NAMESPACE), "the printer columns"
    )


def _set_columns(lab: Lab, columns: list[dict[str, Any]]) -> None:
    """Give every version of the MemoryStore CRD these printer columns."""
    c = lab.support("memorystore_crd")
    path = "/spec/versions/{}/additionalPrinterColumns"
    c.patch_crd(lab, c.for_every_version(lab, lambda i, _: {"op": "add", "path": path.format(i), "value": columns}))


def _name_the_fields_without_spec(lab: Lab) -> None:
    """Columns on .engine and .sizeGi: the names are right, but those paths are empty at the top of a MemoryStore."""
    _set_columns(lab, [{"name": "Engine", "type": "string", "jsonPath": ".engine"},
                       {"name": "Size", "type": "integer", "jsonPath": ".sizeGi"}])


def _only_in_wide_output(lab: Lab) -> None:
    """The right paths, copied from a CRD that marks its extra columns priority 1 (shown with -o wide only)."""
    _set_columns(lab, [{**column, "priority": 1} for column in COLUMNS[:2]])


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "columns on .engine and .sizeGi, outside spec": _name_the_fields_without_spec,
    "the right columns with priority 1": _only_in_wide_output,
}
