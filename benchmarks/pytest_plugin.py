"""What the pytest plugin (krmcourse/pytest_plugin.py) costs per test and per session, beside the alternatives.

Run:  .venv/bin/python benchmarks/pytest_plugin.py [--rounds 7]   (KRMCOURSE_PROVIDER picks the provider)

In one run, alternating so that each meets the same machine:
- ``per test, plugin``: what ``krm_lab`` does before each test: restore the session's baseline snapshot,
  after a test's worth of change (a namespace, a custom resource in it, a ConfigMap);
- ``per test, new cluster``: what a plugin without snapshots would do instead: a new cluster with the CRDs
  applied and established, taken down after the test;
- ``session start``: what ``krm_cluster`` does once: a cluster up, the CRDs in, the baseline saved;
- ``floor``: bare etcd plus kube-apiserver started directly until /readyz answers (benchmarks/cluster_startup.py),
  which nothing that serves the Kubernetes API can beat.
It prints medians and writes them as JSON to benchmarks/results/.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from cluster_startup import _service_account_key, floor_run  # benchmarks/: run as a script, on sys.path
from record import save

from krmcourse import Lab, pytest_plugin, snapshots

#: The plugin's own test (tests/test_pytest_plugin.py) holds the Widget CRD measured here too.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))


def session(crds: Path) -> Lab:
    """What krm_cluster does: a cluster of its own, the CRDs in and established, the baseline saved."""
    lab = Lab(pytest_plugin.LAB, instance="bench-plugin", say=lambda _m: None)
    lab.down()
    lab.up()
    for path in pytest_plugin.manifests(crds):
        lab.apply(path)
    lab.wait_for("crd/widgets.example.com", "condition=Established", timeout=60)
    if snapshots.save(lab, pytest_plugin.BASELINE) is None:
        raise SystemExit("the baseline snapshot could not be saved: this provider cannot snapshot")
    return lab


def a_tests_work(lab: Lab, n: int) -> None:
    lab.kubectl("create", "namespace", f"t{n}")
    lab.apply({"apiVersion": "example.com/v1", "kind": "Widget",
               "metadata": {"name": "w", "namespace": f"t{n}"}, "spec": {"size": n}})
    lab.kubectl("create", "configmap", "c", "-n", f"t{n}", f"--from-literal=n={n}")


def timed(step: Callable[[], object]) -> float:
    started = time.monotonic()
    step()
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    import test_pytest_plugin

    runs: dict[str, list[float]] = {k: [] for k in ("per test, plugin", "per test, new cluster",
                                                   "session start", "floor")}
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        crds = Path(tmp) / "crds"
        crds.mkdir()
        (crds / "widgets.yaml").write_text(test_pytest_plugin.WIDGET_CRD)
        sa_key = _service_account_key(Path(tmp))
        for n in range(args.rounds):
            floor_started, _rss = floor_run(0, sa_key)
            runs["floor"].append(floor_started)
            started = time.monotonic()
            lab = session(crds)
            runs["session start"].append(time.monotonic() - started)
            a_tests_work(lab, n)
            runs["per test, plugin"].append(timed(lambda lab=lab: restore(lab)))
            assert lab.get("namespace", f"t{n}") is None, "the restore left the test's namespace"
            # A new cluster per test: this one goes, and another with the CRDs comes, as each test would need.
            started = time.monotonic()
            lab.down()
            lab = session(crds)
            runs["per test, new cluster"].append(time.monotonic() - started)
            lab.down()
    medians = {k: round(statistics.median(v), 3) for k, v in runs.items()}
    for k, v in medians.items():
        print(f"{k:>24}: {v:7.3f} s  (median of {len(runs[k])})")
    print(f"session start / floor: {medians['session start'] / medians['floor']:.2f}x")
    save("pytest_plugin", {
        "provider": os.environ.get("KRMCOURSE_PROVIDER") or "kwok", "rounds": args.rounds,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "load_before": load, "load_after": os.getloadavg()[0],
        "median_seconds": medians, "runs": {k: [round(x, 3) for x in v] for k, v in runs.items()},
        "session_start_over_floor": round(medians["session start"] / medians["floor"], 2),
    })


def restore(lab: Lab) -> None:
    if not snapshots.restore(lab, pytest_plugin.BASELINE):
        raise SystemExit("no baseline snapshot to restore")


if __name__ == "__main__":
    main()
