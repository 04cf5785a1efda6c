"""Exercise: make ``kubectl get caches`` show each Cache's engine and size.

The check reads the CRD's additionalPrinterColumns for every served version (kubectl uses the
version discovery prefers, which changes when a version is added), then asks kubectl itself and
looks for the engine of a known Cache in its table.
"""

from __future__ import annotations

from krmcourse import CheckFailed, Lab

COLUMNS = [
    {"name": "Engine", "type": "string", "jsonPath": ".spec.engine"},
    {"name": "Size", "type": "integer", "jsonPath": ".spec.sizeGi", "description": "Memory in GiB"},
    {"name": "Ready", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


def check(lab: Lab) -> None:
    c = lab.support("cache_crd")
    for version, paths in c.printer_columns(lab).items():
        wanted = {".spec.engine": "the engine", ".spec.sizeGi": "the size"}
        absent = [what for path, what in wanted.items() if path not in paths]
        if absent:
            raise CheckFailed(
                f"Version {version} of the Cache CRD declares no column for {' or '.join(absent)}."
            )
    table = lab.kubectl("get", "caches", "-n", c.NAMESPACE)
    if "memcached" not in table:
        raise CheckFailed("kubectl get caches does not show the memcached engine of the Cache sessions yet.")


def solve(lab: Lab) -> None:
    c = lab.support("cache_crd")
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
        lab, lambda: "memcached" in lab.kubectl("get", "caches", "-n", c.NAMESPACE), "the printer columns"
    )
