"""How much memory one learner takes in the user image: what z2jh's memory guarantee and limit come from.

Run (root, with Docker's engine running):  .venv/bin/python benchmarks/user_image_memory.py [--idle 60]

In one container of the user image (``krmcourse image build``), started with the options
``deploy/z2jh/values.yaml`` sets (uid 1000, no capabilities, no privilege escalation, its memory limit):

1. JupyterLab, with a token (the image's ``jupyterhub-singleuser`` is the same server plus the hub's
   login, which needs a hub to ask; without one no kernel can be started through it);
2. a kernel started through JupyterLab's REST API, which runs ``Lab("welcome").up()`` as notebook 00
   does, through the kernel's websocket;
3. idle for ``--idle`` seconds, then the container's memory read from its cgroup five times, 10 s
   apart: its usage, and its working set (usage less inactive file cache, what Kubernetes counts
   against a limit and shows in ``kubectl top``); and each process's RSS;
4. the same with a second lab cluster up (``krmcourse up sandbox``), as notebook 34 has two.

It prints the medians and writes them, with each process's RSS, to benchmarks/results/.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import subprocess
import time
from pathlib import Path

from record import save  # benchmarks/record.py: run as a script, this folder is on sys.path

from krmcourse import userimage

#: Run inside the container by the kernel's client: start a kernel and have it bring the lab up.
KERNEL_CLIENT = r"""
import json, sys, urllib.request, uuid
import websocket
token, code = sys.argv[1], sys.argv[2]
base = "127.0.0.1:8888"
request = urllib.request.Request(f"http://{base}/api/kernels", data=b"{}", method="POST",
                                 headers={"Authorization": f"token {token}"})
kernel = json.load(urllib.request.urlopen(request))["id"]
ws = websocket.create_connection(f"ws://{base}/api/kernels/{kernel}/channels?token={token}", timeout=600)
msg_id = uuid.uuid4().hex
ws.send(json.dumps({"header": {"msg_id": msg_id, "msg_type": "execute_request", "username": "learner",
                               "session": uuid.uuid4().hex, "version": "5.3"},
                    "parent_header": {}, "metadata": {}, "channel": "shell",
                    "content": {"code": code, "silent": False, "store_history": True, "user_expressions": {},
                                "allow_stdin": False, "stop_on_error": True}}))
while True:
    reply = json.loads(ws.recv())
    if reply.get("parent_header", {}).get("msg_id") != msg_id:
        continue
    if reply["msg_type"] in ("stream", "error"):
        print(reply["content"].get("text") or reply["content"].get("evalue"))
    if reply["msg_type"] == "execute_reply":
        print("status:", reply["content"]["status"])
        sys.exit(reply["content"]["status"] != "ok")
"""


def docker(*args: str, timeout: float = 900) -> str:
    done = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise SystemExit(f"docker {' '.join(args[:3])} failed: {done.stderr[-2000:]}")
    return done.stdout


def cgroup(cid: str) -> Path:
    folder = Path(f"/sys/fs/cgroup/memory/docker/{cid}")
    if not folder.is_dir():
        raise SystemExit(f"{folder} is missing: this script reads cgroup v1's memory controller, as on this machine.")
    return folder


def reading(cid: str) -> dict[str, float]:
    folder = cgroup(cid)
    usage = int((folder / "memory.usage_in_bytes").read_text())
    stat = dict(line.split() for line in (folder / "memory.stat").read_text().splitlines())
    mib = 2**20
    return {"usage_mib": usage / mib, "working_set_mib": (usage - int(stat["total_inactive_file"])) / mib,
            "rss_mib": int(stat["total_rss"]) / mib, "cache_mib": int(stat["total_cache"]) / mib}


def measure(cid: str, idle: float, what: str) -> dict[str, object]:
    print(f"{what}: idle for {idle:.0f} s, then five readings 10 s apart")
    time.sleep(idle)
    readings = []
    for i in range(5):
        if i:
            time.sleep(10)
        readings.append(reading(cid))
    processes = docker("exec", cid, "ps", "-eo", "rss=,args=").splitlines()
    medians = {k: statistics.median(r[k] for r in readings) for k in readings[0]}
    print("  " + ", ".join(f"{k} {v:.0f}" for k, v in medians.items()))
    return {"medians": medians, "readings": readings,
            "processes_rss_kib": [line.strip()[:160] for line in processes if line.strip()]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle", type=float, default=60, help="seconds to let things settle before reading")
    args = parser.parse_args()
    tag = userimage.build()
    config = userimage.values()
    token = secrets.token_hex(16)
    name = f"krmcourse-image-memory-{secrets.token_hex(4)}"
    cid = docker("run", "--detach", f"--name={name}", *userimage.run_options(config), tag,
                 "jupyter", "lab", "--ip=127.0.0.1", "--port=8888", "--no-browser",
                 f"--ServerApp.token={token}").strip()
    try:
        deadline = time.monotonic() + 300
        while "is running at" not in docker("logs", cid) + subprocess.run(
                ["docker", "logs", cid], capture_output=True, text=True).stderr:
            if time.monotonic() > deadline:
                raise SystemExit("JupyterLab did not start in the container within 300 s")
            time.sleep(1)  # a poll interval
        docker("exec", cid, "python", "-c", KERNEL_CLIENT, token,
               "from krmcourse import Lab\nlab = Lab('welcome').up()\nprint(lab.kubectl('get', 'nodes'))")
        one = measure(cid, args.idle, "JupyterLab, a kernel, the welcome lab up")
        docker("exec", cid, "krmcourse", "up", "sandbox")
        two = measure(cid, args.idle, "the same, and a second lab cluster (sandbox)")
        state = json.loads(docker("inspect", cid))[0]["State"]
        result = {"image": tag, "image_mib": userimage.image_size(tag) / 2**20,
                  "options": userimage.run_options(config), "idle_s": args.idle, "oom_killed": state["OOMKilled"],
                  "one_lab": one, "two_labs": two,
                  "load_average": os.getloadavg(), "cores": os.cpu_count()}
        save("user_image_memory", result)
    finally:
        subprocess.run(["docker", "rm", "--force", "--volumes", cid], capture_output=True)


if __name__ == "__main__":
    main()
