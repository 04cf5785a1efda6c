"""How long a cold toolchain build takes: what a learner waits for once, on a fresh machine.

Run:  .venv/bin/python benchmarks/toolchain_build.py

It runs ``krmcourse toolchain install`` with an empty binary cache, an empty Go build cache and an
empty Go module cache (all in a temporary folder, removed afterwards), so every module is downloaded
and every package compiled, as on a fresh machine. It records the wall time of each component as the
build reports it, the total wall time, the CPU time of the build's processes and the largest resident
memory of any one of them (the Go linker), and writes them as JSON to benchmarks/results/.
"""

from __future__ import annotations

import json
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from record import save  # benchmarks/record.py: run as a script, this folder is on sys.path

BUILT = re.compile(r"^\[\d+/\d+\] (\S+) (\S+) built in (\d+) s")


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="krm-cold-build-"))
    env = dict(os.environ, KRMCOURSE_CACHE=str(work / "cache"), GOCACHE=str(work / "gocache"),
               GOMODCACHE=str(work / "gomod"))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    components: dict[str, int] = {}
    try:
        proc = subprocess.Popen([sys.executable, "-m", "krmcourse.cli", "toolchain", "install"], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert proc.stdout is not None
        for line in proc.stdout:
            print(line, end="", flush=True)
            if m := BUILT.match(line):
                components[f"{m.group(1)} {m.group(2)}"] = int(m.group(3))
        if proc.wait() != 0:
            raise SystemExit(f"the build failed (exit code {proc.returncode}); see its output above")
        wall = time.monotonic() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    finally:
        # Go marks its module cache read-only; make it writable so that it can be removed.
        subprocess.run(["chmod", "-R", "u+w", str(work)], check=False)
        shutil.rmtree(work, ignore_errors=True)
    result = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "go": subprocess.run(["go", "version"], capture_output=True, text=True).stdout.strip(),
                    "load_avg_1m_at_end": os.getloadavg()[0]},
        "caches": "empty binary, Go build and Go module caches: every module downloaded, every package built",
        "wall_seconds": round(wall),
        "component_wall_seconds": components,
        "cpu_user_seconds": round(after.ru_utime - before.ru_utime),
        "cpu_system_seconds": round(after.ru_stime - before.ru_stime),
        "largest_process_rss_mib": round(after.ru_maxrss / 1024),
    }
    print(json.dumps(result, indent=2))
    save("toolchain_build", result)


if __name__ == "__main__":
    main()
