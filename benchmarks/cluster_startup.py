"""How long a lab cluster takes to come up, and how much memory it holds, beside the bare floor.

Run:  .venv/bin/python benchmarks/cluster_startup.py [--runs 5]

In one run, alternating so that both see the same machine load, it measures:
- ``lab up``: ``Lab("sandbox").up()`` with the toolchain already built, until the cluster is ready
  (API answering /readyz, the simulated node Ready, the default ServiceAccount present), and when
  each of those steps ended; then the resident memory (RSS) of all five component processes, after
  a few seconds of settling;
- ``floor``: bare etcd plus kube-apiserver started directly (same binaries, same flags that matter),
  until /readyz answers; and their RSS. Nothing faster can serve the Kubernetes API.

It prints a table of medians and the ratio, and writes the figures as JSON to benchmarks/results/.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import ssl
import statistics
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import psutil
from record import save  # benchmarks/record.py: run as a script, this folder is on sys.path

from krmcourse import Lab, toolchain
from krmcourse.apiload import rss_mib
from krmcourse.providers.kwok import free_ports


def lab_run(settle: float) -> tuple[float, float, dict[str, float]]:
    lab = Lab("sandbox", instance="bench", say=lambda _m: None)
    lab.down()
    started = time.monotonic()
    lab.up()
    elapsed = time.monotonic() - started
    steps = dict(lab.startup)
    time.sleep(settle)
    memory = rss_mib(list(lab.component_pids().values()))
    lab.down()
    return elapsed, memory, steps


def _service_account_key(folder: Path) -> Path:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    path = folder / "sa.key"
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    return path


def floor_run(settle: float, sa_key: Path) -> tuple[float, float]:
    work = Path(tempfile.mkdtemp(prefix="krm-floor-"))
    client, peer, secure = free_ports(3)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        started = time.monotonic()
        procs.append(subprocess.Popen(
            [str(toolchain.binary("etcd")), f"--data-dir={work / 'etcd'}", "--unsafe-no-fsync=true",
             f"--listen-client-urls=http://127.0.0.1:{client}", f"--advertise-client-urls=http://127.0.0.1:{client}",
             f"--listen-peer-urls=http://127.0.0.1:{peer}", f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
             f"--initial-cluster=default=http://127.0.0.1:{peer}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        procs.append(subprocess.Popen(
            [str(toolchain.binary("kube-apiserver")), f"--etcd-servers=http://127.0.0.1:{client}",
             "--bind-address=127.0.0.1", f"--secure-port={secure}", f"--cert-dir={work / 'certs'}",
             "--authorization-mode=Node,RBAC", "--service-account-issuer=https://kubernetes.default.svc",
             f"--service-account-key-file={sa_key}", f"--service-account-signing-key-file={sa_key}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        while True:
            try:
                with urllib.request.urlopen(f"https://127.0.0.1:{secure}/readyz", context=context,
                                            timeout=2) as resp:
                    if resp.read() == b"ok":
                        break
            except OSError:
                pass
            if time.monotonic() - started > 120:
                raise RuntimeError("the bare API server did not become ready in 120 s")
            time.sleep(0.05)
        elapsed = time.monotonic() - started
        time.sleep(settle)
        return elapsed, rss_mib([p.pid for p in procs])
    finally:
        for proc in reversed(procs):
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--settle", type=float, default=5.0, help="seconds to wait before reading memory")
    args = parser.parse_args()
    if not toolchain.is_installed():
        raise SystemExit("Build the toolchain first: krmcourse toolchain install")
    key_dir = Path(tempfile.mkdtemp(prefix="krm-bench-key-"))
    sa_key = _service_account_key(key_dir)
    lab_times, lab_mem, floor_times, floor_mem = [], [], [], []
    lab_steps: list[dict[str, float]] = []
    for i in range(args.runs):
        t, m, steps = lab_run(args.settle)
        lab_times.append(t)
        lab_mem.append(m)
        lab_steps.append(steps)
        t, m = floor_run(args.settle, sa_key)
        floor_times.append(t)
        floor_mem.append(m)
        print(f"run {i + 1}: lab up {lab_times[-1]:.2f} s, {lab_mem[-1]:.0f} MiB | "
              f"floor {floor_times[-1]:.2f} s, {floor_mem[-1]:.0f} MiB", flush=True)
    shutil.rmtree(key_dir, ignore_errors=True)
    result = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": {"cpus": os.cpu_count(), "memory_gib": round(psutil.virtual_memory().total / 2**30),
                    "python": platform.python_version(), "load_avg_1m_at_end": os.getloadavg()[0]},
        "runs": args.runs,
        "lab_up_seconds_median": round(statistics.median(lab_times), 2),
        "floor_up_seconds_median": round(statistics.median(floor_times), 2),
        "ratio_lab_to_floor": round(statistics.median(lab_times) / statistics.median(floor_times), 2),
        # When each step of `up` ended, in seconds from its start (medians): kwokctl has returned (it
        # waits until the API server answers /version); /readyz answers ok; the node is Ready and the
        # default ServiceAccount exists; the lab's manifests are applied (none for the sandbox).
        "lab_steps_seconds_median": {k: round(statistics.median(s[k] for s in lab_steps), 2)
                                     for k in lab_steps[0]},
        "lab_rss_mib_median": round(statistics.median(lab_mem)),
        "floor_rss_mib_median": round(statistics.median(floor_mem)),
        "lab_up_seconds": [round(t, 2) for t in lab_times],
        "floor_up_seconds": [round(t, 2) for t in floor_times],
    }
    print()
    print(f"{'':<22}{'lab cluster':>14}{'bare floor':>14}")
    print(f"{'median up (s)':<22}{result['lab_up_seconds_median']:>14}{result['floor_up_seconds_median']:>14}")
    print(f"{'median RSS (MiB)':<22}{result['lab_rss_mib_median']:>14}{result['floor_rss_mib_median']:>14}")
    print(f"lab / floor start-up ratio: {result['ratio_lab_to_floor']}")
    print("steps of lab up (median s from its start): "
          + ", ".join(f"{k} {v}" for k, v in result["lab_steps_seconds_median"].items()))
    save("cluster_startup", result)


if __name__ == "__main__":
    main()
