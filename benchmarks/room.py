"""A room on the real hub: N learners, each with JupyterLab, a kernel and a lab cluster, idle; and N ``up``s at once.

Run (as root, after ``./course install``, which fetches the hub's downloads):
    .venv/bin/python benchmarks/room.py --learners 5 10 20 [--lab sandbox] [--no-burst]

For each N, in turn, it makes a room of its own with ``krmcourse.hub.start`` (accounts ``kr<random>l01`` ...,
the shared environment and homes in a folder of its own under /tmp, the hub's state in a KRMCOURSE_HOME of
its own, so it never meets another hub on the machine), then, as a room would:

1. starts every learner's JupyterLab through the hub's REST API (a few at a time: ``--at-once``), and in
   each a kernel, through that server's REST API, both as the room's service;
2. **burst**: every kernel runs ``Lab(LAB).up()``, the cell a learner runs, and all are released by one
   barrier at the same moment: the time until each is ready, until the last is, and each failure with its
   message. (With ``--no-burst``, the ``up``s run ``--at-once`` at a time.) A learner whose burst failed
   gets one more ``up`` on its own, so that the idle room is complete;
3. **idle room**: after ``--settle`` seconds, per learner, every process of their account (JupyterLab,
   kernel, the lab cluster's five components): resident memory (RSS), proportional set size (PSS, from
   /proc/PID/smaps_rollup: each shared page split between the processes that map it, and the five
   binaries' code is shared by every cluster) and own memory (RssAnon); the hub and its proxy likewise;
   the CPU every one of the room's processes spends over ``--window`` seconds (from /proc/PID/stat); and
   the machine's MemAvailable before the room and with it idle.

With ``--cull-rounds R`` it instead checks that a room leaks nothing: one room of the first ``--learners``,
with the culler's timeout at ``--cull-timeout`` seconds, R times starts every learner's server, kernel and
lab (``--at-once`` at a time), leaves a file in each home, walks away (closes the kernels' connections)
and waits until the culler has stopped every server and the hub's post-stop hook every lab cluster; then
no process of the learners may run or listen, no lab cluster may be recorded, and no file of theirs may be
lost. It writes benchmarks/results/room_culling-YYYYMMDD-HHMM.json.

Then ``hub.stop(remove_accounts=True)`` and a check that nothing is left: no process of the room's
accounts, no account, no home, no port of the room listening. It cleans up on a failure and on Ctrl-C or
SIGTERM too. It prints a table and writes benchmarks/results/room-YYYYMMDD-HHMM.json with the machine's
conditions (load, memory, other lab clusters running).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import pwd
import secrets
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
import websocket
from record import anonymous_mib, save  # benchmarks/record.py: run as a script, this folder is on sys.path

from krmcourse import Lab, catalog, hub
from krmcourse.errors import KrmcourseError

#: The cheapest lab: one simulated node, nothing installed.
DEFAULT_LAB = "sandbox"
#: What a learner's first cell runs, as in the notebooks.
UP_CODE = "from krmcourse import Lab\nlab = Lab({lab!r}).up()\nprint(lab.server)"
#: Seconds each server's spawn, and each ``up``, may take on its own; waits for many are these times N
#: divided by how many run at once, so that a room of 40 on two cores is not cut short.
SPAWN_S, UP_S, KERNEL_S = 180.0, 240.0, 120.0
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class RoomError(RuntimeError):
    """What failed, for whom, and what to do next."""


# ----------------------------------------------------------------- /proc readings (pure, tested)
def parse_smaps_rollup(text: str) -> dict[str, int]:
    """``/proc/PID/smaps_rollup`` as {field: kB}: Rss, Pss, Pss_Anon, Anonymous, Shared_Clean ..."""
    fields = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if len(parts) == 2 and parts[1] == "kB":
            fields[key.strip()] = int(parts[0])
    return fields


def parse_stat_ticks(text: str) -> int:
    """User plus system CPU time, in clock ticks, from ``/proc/PID/stat`` (fields 14 and 15; the command
    name, field 2, is in parentheses and may hold spaces)."""
    after = text[text.rindex(")") + 2:].split()  # field 3 onwards
    return int(after[11]) + int(after[12])


def memory_mib(pids: list[int]) -> dict[str, float]:
    """RSS, PSS (from smaps_rollup) and own memory (RssAnon) of the processes, in MiB; one that exited
    meanwhile is left out."""
    rss = pss = anon = 0.0
    for pid in pids:
        try:
            rollup = parse_smaps_rollup(Path(f"/proc/{pid}/smaps_rollup").read_text())
            own = anonymous_mib([pid])
        except (FileNotFoundError, ProcessLookupError, StopIteration):
            continue
        rss, pss, anon = rss + rollup.get("Rss", 0) / 1024, pss + rollup.get("Pss", 0) / 1024, anon + own
    return {"rss_mib": round(rss, 1), "pss_mib": round(pss, 1), "anon_mib": round(anon, 1)}


#: What each of a learner's processes is, by a word of its command line; the rest is their lab cluster.
PARTS = (("jupyterhub-singleuser", "jupyterlab"), ("ipykernel", "kernel"))


def part_of(command: str) -> str:
    return next((part for word, part in PARTS if word in command), "cluster")


def memory_by_part(pids: list[int]) -> dict[str, dict[str, float]]:
    """:func:`memory_mib` of a learner's JupyterLab, kernel and lab cluster apart."""
    parts: dict[str, list[int]] = {}
    for pid in pids:
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (FileNotFoundError, ProcessLookupError):
            continue
        parts.setdefault(part_of(command), []).append(pid)
    return {part: memory_mib(found) for part, found in sorted(parts.items())}


def cpu_ticks(pids: list[int]) -> dict[int, int]:
    found = {}
    for pid in pids:
        try:
            found[pid] = parse_stat_ticks(Path(f"/proc/{pid}/stat").read_text())
        except (FileNotFoundError, ProcessLookupError):
            continue
    return found


def cores_used(before: dict[int, int], after: dict[int, int], seconds: float) -> float:
    """CPU cores the processes used on average between two readings (those present in both)."""
    ticks = sum(after[pid] - before[pid] for pid in before.keys() & after.keys())
    return round(ticks / CLOCK_TICKS / seconds, 4)


def mem_available_mib() -> float:
    return round(psutil.virtual_memory().available / 2**20)


def summary(values: list[float]) -> dict[str, float]:
    """Median, lowest, highest and sum of one figure over the learners."""
    if not values:
        return {}
    return {"median": round(statistics.median(values), 1), "min": round(min(values), 1),
            "max": round(max(values), 1), "sum": round(sum(values), 1)}


def fits(mem_available_mib: float, per_learner_mib: float, idle_cores: float, learners: int,
         cores: int, cpu_share: float = 0.5) -> dict[str, int]:
    """How many learners memory and idle CPU allow, extrapolated: MemAvailable over each one's PSS, and
    the learners whose idle CPU fills ``cpu_share`` of the cores (the rest is left for what they do)."""
    by_memory = math.floor(mem_available_mib / per_learner_mib + 1e-9) if per_learner_mib > 0 else 0
    per_core = idle_cores / learners if learners else 0
    by_cpu = math.floor(cores * cpu_share / per_core + 1e-9) if per_core > 0 else 0
    return {"by_memory": by_memory, "by_idle_cpu": by_cpu}


# ----------------------------------------------------------------- a learner's server and kernel
@dataclass
class Learner:
    name: str
    uid: int
    kernel: str = ""
    socket: websocket.WebSocket | None = None
    ports: set[int] = field(default_factory=set)

    def pids(self) -> list[int]:
        return [p.pid for p in processes_of_uids({self.uid})]


def processes_of_uids(uids: set[int]) -> list[psutil.Process]:
    """The running processes (not zombies) whose real uid is one of ``uids``."""
    return [p for p in psutil.process_iter(["uids", "status"]) if p.info["uids"] is not None
            and p.info["uids"].real in uids and p.info["status"] != psutil.STATUS_ZOMBIE]


def start_server(room: hub.Room, learner: Learner, timeout: float) -> float:
    """Start the learner's JupyterLab through the hub and wait until the hub calls it ready."""
    started = time.monotonic()
    status, body = hub.api(room, "POST", f"users/{learner.name}/server")
    if status not in (201, 202, 400):  # 400: it runs already
        raise RoomError(f"{learner.name}: the hub did not start their server ({status}: {body}); see "
                        f"{hub.hub_dir() / 'jupyterhub.log'}")

    def ready() -> bool:
        code, user = hub.api(room, "GET", f"users/{learner.name}")
        return code == 200 and bool((user.get("servers") or {}).get("", {}).get("ready"))

    Lab.wait_until(ready, timeout, interval=1, message=f"{learner.name}: their server was not ready",
                   hint=f"Read the hub's log, {hub.hub_dir() / 'jupyterhub.log'}.")
    return round(time.monotonic() - started, 2)


def start_kernel(room: hub.Room, learner: Learner, timeout: float) -> None:
    """A kernel in the learner's JupyterLab (its REST API), and a websocket to it, as the room's service."""
    status, body = hub.server_api(room, learner.name, "POST", "kernels", {"name": "python3"})
    if status != 201:
        raise RoomError(f"{learner.name}: their JupyterLab started no kernel ({status}: {body}).")
    learner.kernel = body["id"]
    url = room.url.replace("http://", "ws://") + f"user/{learner.name}/api/kernels/{learner.kernel}/channels"
    for attempt in (1, 2):  # a connection made while the kernel still starts may be dropped: JupyterLab reconnects
        try:
            learner.socket = websocket.create_connection(url, timeout=timeout,
                                                         header=[f"Authorization: token {hub.service_token()}"])
            execute(learner, "1", timeout)  # the kernel answers: it has started
            return
        except (websocket.WebSocketException, OSError, RoomError) as error:
            if attempt == 2:
                raise RoomError(f"{learner.name}: no working websocket to their kernel ({error}); see "
                                f"{hub.hub_dir() / 'jupyterhub.log'}") from error


def execute(learner: Learner, code: str, timeout: float) -> str:
    """Run ``code`` in the learner's kernel and return what it printed; RoomError with the kernel's error."""
    assert learner.socket is not None
    msg_id = uuid.uuid4().hex
    learner.socket.send(json.dumps({
        "header": {"msg_id": msg_id, "msg_type": "execute_request", "username": learner.name, "session": msg_id,
                   "date": datetime.now(UTC).isoformat(), "version": "5.3"},
        "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
        "content": {"code": code, "silent": False, "store_history": False, "user_expressions": {},
                    "allow_stdin": False, "stop_on_error": True}}))
    deadline, printed = time.monotonic() + timeout, list[str]()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise RoomError(f"{learner.name}: their kernel did not finish {code.splitlines()[-1]!r} in {timeout:.0f} s;"
                            f" it printed: {''.join(printed)[-500:]}")
        learner.socket.settimeout(min(left, 10))
        try:
            message = json.loads(learner.socket.recv())
        except websocket.WebSocketTimeoutException:
            continue
        except (websocket.WebSocketException, OSError) as error:
            raise RoomError(f"{learner.name}: the connection to their kernel broke ({error}).") from error
        if message.get("parent_header", {}).get("msg_id") != msg_id:
            continue
        kind, content = message["msg_type"], message["content"]
        if kind == "stream":
            printed.append(content["text"])
        elif kind == "execute_reply":
            if content["status"] != "ok":
                raise RoomError(f"{learner.name}: {content.get('ename')}: {content.get('evalue', '')[:800]}")
            return "".join(printed)


# ----------------------------------------------------------------- the room
@dataclass
class MadeRoom:
    room: hub.Room
    learners: list[Learner]
    base: Path
    #: The burst's barrier, aborted when the room is taken apart (a Ctrl-C before every learner reached it).
    barrier: threading.Barrier | None = None
    started: float = field(default_factory=time.monotonic)

    def say(self, message: str) -> None:
        print(f"  [{time.monotonic() - self.started:7.1f} s] {message}", flush=True)


def concurrently(items: list[Learner], at_once: int, step: Callable[[Learner], Any]) -> dict[str, Any]:
    """``step`` for every learner, ``at_once`` at a time; {name: result}, or the first learner's error.
    On an error or Ctrl-C it does not wait for the others: taking the room apart ends them."""
    pool = ThreadPoolExecutor(max_workers=max(1, at_once))
    try:
        futures = {learner.name: pool.submit(step, learner) for learner in items}
        return {name: future.result() for name, future in futures.items()}
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def make_room(learners: int, base: Path, say: Callable[[str], None], idle_timeout: int = 3600) -> MadeRoom:
    tag = secrets.token_hex(2)
    prefix = f"kr{tag}l"
    names = [*hub.learner_names(prefix, learners), f"kr{tag}admin"]
    taken = [n for n in names if hub.account_exists(n)]
    if taken:
        raise RoomError(f"accounts {taken} exist already; run the benchmark again (it picks another name).")
    room = hub.start(learners, prefix=base / "opt", homes=base / "homes", learner_prefix=prefix,
                     admin=f"kr{tag}admin", max_labs=1, idle_timeout=idle_timeout, say=say)
    return MadeRoom(room, [Learner(n, pwd.getpwnam(n).pw_uid) for n in room.learners], base)


def bring_up(made: MadeRoom, lab: str, burst: bool, at_once: int) -> dict[str, Any]:
    """Every learner's ``up``: all released by one barrier (burst), or ``at_once`` at a time."""
    n, code = len(made.learners), UP_CODE.format(lab=lab)
    released: list[float] = []
    barrier = threading.Barrier(n, action=lambda: released.append(time.monotonic())) if burst else None
    made.barrier = barrier
    timeout = UP_S + UP_S * n / (2 if burst else max(1, at_once))

    def up(learner: Learner) -> dict[str, Any]:
        if barrier is not None:
            barrier.wait(timeout=KERNEL_S)
        began = released[0] if burst else time.monotonic()
        try:
            execute(learner, code, timeout)
        except RoomError as error:
            made.say(f"{learner.name}: up FAILED: {error}")
            return {"failed": str(error)}
        took = round(time.monotonic() - began, 2)
        made.say(f"{learner.name}: {lab} ready after {took} s")
        return {"ready_s": took}

    got = concurrently(made.learners, n if burst else at_once, up)
    ready = [r["ready_s"] for r in got.values() if "ready_s" in r]
    failures = {name: r["failed"] for name, r in got.items() if "failed" in r}
    return {"at_once": n if burst else at_once, "per_learner_s": {k: r.get("ready_s") for k, r in got.items()},
            "last_ready_s": max(ready) if ready else None,
            "median_s": round(statistics.median(ready), 2) if ready else None,
            "failures": failures}


def idle_room(made: MadeRoom, settle: float, window: float) -> dict[str, Any]:
    """What the idle room holds: per learner and for the hub and proxy, then the CPU over ``window``."""
    time.sleep(settle)
    per = {ln.name: {**memory_mib(ln.pids()), "processes": len(ln.pids()), "parts": memory_by_part(ln.pids())}
           for ln in made.learners}
    own = [p for p in (hub.running_hub(), hub.proxy_pid()) if p is not None]
    everything = own + [pid for ln in made.learners for pid in ln.pids()]
    before, start = cpu_ticks(everything), time.monotonic()
    time.sleep(window)
    after, took = cpu_ticks(everything), time.monotonic() - start
    for ln in made.learners:
        mine = ln.pids()
        per[ln.name]["idle_cpu_cores"] = cores_used({p: before[p] for p in mine if p in before}, after, took)
        ln.ports |= {port for _, port in hub.listening(mine)}
    return {
        "per_learner": per,
        **{key: summary([p[key] for p in per.values()]) for key in ("rss_mib", "pss_mib", "anon_mib")},
        "pss_mib_by_part": {part: summary([p["parts"][part]["pss_mib"] for p in per.values() if part in p["parts"]])
                            for part in ("jupyterlab", "kernel", "cluster")},
        "hub_and_proxy": {**memory_mib(own),
                          "idle_cpu_cores": cores_used({p: before[p] for p in own if p in before}, after, took)},
        "idle_cpu_cores": cores_used(before, after, took),
        "idle_window_s": round(took, 1), "mem_available_mib": mem_available_mib(),
    }


def measure_room(learners: int, args: argparse.Namespace, base: Path) -> dict[str, Any]:
    """One room of ``learners``: made, measured, and (always) taken apart, checked to leave nothing."""
    free_before = mem_available_mib()
    print(f"== a room of {learners} learners ({args.lab}; MemAvailable {free_before:.0f} MiB)", flush=True)
    made: MadeRoom | None = None
    result: dict[str, Any] = {"learners": learners, "mem_available_before_mib": free_before}
    try:
        made = make_room(learners, base, lambda m: print(f"  {m}", flush=True))
        result["hub_ports"] = [made.room.port, made.room.hub_port, made.room.api_port]
        at_once, n = args.at_once, learners
        spawn = SPAWN_S + SPAWN_S * n / at_once
        result["server_start_s"] = concurrently(made.learners, at_once, lambda ln: start_server(made.room, ln, spawn))
        made.say(f"{n} servers ready (slowest {max(result['server_start_s'].values())} s)")
        concurrently(made.learners, at_once, lambda ln: start_kernel(made.room, ln, KERNEL_S + KERNEL_S * n / at_once))
        made.say(f"{n} kernels answer")
        result["burst" if args.burst else "up"] = bring_up(made, args.lab, args.burst, at_once)
        failed = [ln for ln in made.learners if ln.name in result["burst" if args.burst else "up"]["failures"]]
        for learner in failed:  # one more try each, alone: the idle room needs every cluster
            execute(learner, UP_CODE.format(lab=args.lab), UP_S)
            made.say(f"{learner.name}: up on its own after the failure: ready")
        made.say(f"every lab is up; idle for {args.settle:.0f} s, then CPU over {args.window:.0f} s")
        result["idle"] = idle_room(made, args.settle, args.window)
        # (on a machine others use too, their clusters coming and going weigh on this as much as the room)
        result["idle"]["mem_available_drop_mib"] = round(free_before - result["idle"]["mem_available_mib"])
        return result
    except (RoomError, TimeoutError, KrmcourseError, websocket.WebSocketException) as error:
        print(f"  FAILED with {learners} learners: {error}", flush=True)
        result["error"] = str(error)  # kept with what was measured before (the burst's failures, say)
        return result
    finally:
        result["left_behind"] = take_apart(made, base)


def start_and_bring_up(made: MadeRoom, lab: str, at_once: int) -> dict[str, Any]:
    """Every learner's server and kernel, then their lab (``at_once`` at a time): a room at work."""
    n = len(made.learners)
    concurrently(made.learners, at_once, lambda ln: start_server(made.room, ln, SPAWN_S + SPAWN_S * n / at_once))
    concurrently(made.learners, at_once, lambda ln: start_kernel(made.room, ln, KERNEL_S + KERNEL_S * n / at_once))
    made.say(f"{n} servers and kernels answer")
    return bring_up(made, lab, burst=False, at_once=at_once)


def culled(made: MadeRoom, timeout: float) -> float:
    """Wait until the culler has stopped every learner's server and everything of theirs has gone (the
    lab clusters too, by the hub's post-stop hook); the seconds that took."""
    started = time.monotonic()
    for learner in made.learners:  # a learner who walked away: their browser tab closed
        if learner.socket is not None:
            learner.socket.close()
            learner.socket = None

    def gone() -> bool:
        servers = [ln.name for ln in made.learners if (hub.api(made.room, "GET", f"users/{ln.name}")[1] or {})
                   .get("servers")]
        return not servers and not processes_of_uids({ln.uid for ln in made.learners})

    Lab.wait_until(gone, timeout, interval=2, message="the culler did not stop every idle learner's server, and "
                   "with it their processes", hint=f"Read the culler's lines in {hub.hub_dir() / 'jupyterhub.log'}.")
    return round(time.monotonic() - started, 1)


def leaks(made: MadeRoom, homes_before: dict[str, set[str]]) -> list[str]:
    """What a culled room still holds that it should not (processes, lab clusters, listening ports), or
    lost that it should keep (files in a learner's home)."""
    found = [f"process {p.pid} of {p.info['uids'].real}: {_command(p)}"
             for p in processes_of_uids({ln.uid for ln in made.learners})]
    found += [f"{ln.name}: lab cluster {lab} still recorded" for ln in made.learners for lab in hub.labs_up(ln.name)]
    ports = {port for ln in made.learners for port in ln.ports}
    found += [f"port {c.laddr.port} (pid {c.pid})" for c in psutil.net_connections(kind="inet")
              if c.status == psutil.CONN_LISTEN and c.laddr.port in ports and _owner(c.pid or 0) in
              {ln.uid for ln in made.learners}]
    for ln in made.learners:
        lost = homes_before[ln.name] - hub.learner_files(ln.name)
        found += [f"{ln.name} lost {path}" for path in sorted(lost)]
    return found


def cull_rounds(learners: int, rounds: int, args: argparse.Namespace, base: Path) -> dict[str, Any]:
    """``rounds`` times: every learner starts a server, a kernel and a lab, walks away, and is culled;
    after each round nothing of theirs may run or listen, no lab cluster may be left, no file lost."""
    print(f"== {rounds} rounds of {learners} learners culled after {args.cull_timeout} s idle", flush=True)
    made: MadeRoom | None = None
    result: dict[str, Any] = {"learners": learners, "idle_timeout_s": args.cull_timeout, "rounds": []}
    try:
        made = make_room(learners, base, lambda m: print(f"  {m}", flush=True), idle_timeout=args.cull_timeout)
        for number in range(1, rounds + 1):
            up = start_and_bring_up(made, args.lab, args.at_once)
            if up["failures"]:
                raise RoomError(f"round {number}: ups failed: {up['failures']}")
            for ln in made.learners:
                ln.ports |= {port for _, port in hub.listening(ln.pids())}
                kept = Path(pwd.getpwnam(ln.name).pw_dir) / "notebooks" / f"round-{number}.txt"  # a learner's file
                kept.write_text("kept\n")
                os.chown(kept, ln.uid, -1)
            homes = {ln.name: hub.learner_files(ln.name) for ln in made.learners}
            took = culled(made, args.cull_timeout * 4 + 60 * learners / args.at_once)
            found = leaks(made, homes)
            made.say(f"round {number}: every server culled {took} s after the learners left; leaks: {found or 'none'}")
            result["rounds"].append({"round": number, "last_up_s": up["last_ready_s"], "culled_after_s": took,
                                     "leaks": found})
        return result
    except (RoomError, TimeoutError, KrmcourseError, websocket.WebSocketException) as error:
        print(f"  FAILED: {error}", flush=True)
        result["error"] = str(error)
        return result
    finally:
        result["left_behind"] = take_apart(made, base)


@contextmanager
def uninterrupted() -> Iterator[None]:
    """Ctrl-C and SIGTERM wait while the room is taken apart: a half-removed room is worse than a late one."""
    old = signal.signal(signal.SIGINT, signal.SIG_IGN), signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old[0])
        signal.signal(signal.SIGTERM, old[1])


def take_apart(made: MadeRoom | None, base: Path) -> list[str]:
    """Stop the hub, remove the accounts, and say what is left (processes, accounts, homes, ports)."""
    print("  taking the room apart (hub stop --remove-accounts)", flush=True)
    with uninterrupted():
        room = hub.Room.load()
        uids = {ln.uid for ln in made.learners} if made else set()
        names = room.accounts if room else []
        uids |= {pwd.getpwnam(n).pw_uid for n in names if hub.account_exists(n)}
        ports = {port for ln in made.learners for port in ln.ports} if made else set()
        if room:
            ports |= {room.port, room.hub_port, room.api_port}
        own = [p for p in (hub.running_hub(), hub.proxy_pid()) if p is not None]
        if made and made.barrier:
            made.barrier.abort()
        for learner in made.learners if made else []:
            if learner.socket is not None:
                learner.socket.shutdown()  # (a thread may be reading it: no closing handshake)
        if room is not None:
            hub.stop(remove_accounts=True, say=lambda m: print(f"  {m}", flush=True))
        left = leftovers(uids, names, own, ports, room)
        shutil.rmtree(base / "homes", ignore_errors=True)
    for problem in left:
        print(f"  LEFT BEHIND: {problem}", flush=True)
    return left


def leftovers(uids: set[int], names: list[str], own: list[int], ports: set[int], room: hub.Room | None) -> list[str]:
    left = [f"process {p.pid} of uid {p.info['uids'].real}: {_command(p)}" for p in processes_of_uids(uids)]
    left += [f"the hub or proxy, pid {pid}" for pid in own if psutil.pid_exists(pid)
             and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
    left += [f"account {name}" for name in names if hub.account_exists(name)]
    if room is not None:
        left += [f"home {home}" for home in Path(room.homes).glob("*")]
    # A port the room let go may already serve someone else's cluster: only the room's own listeners count.
    left += [f"port {c.laddr.port} (pid {c.pid})" for c in psutil.net_connections(kind="inet")
             if c.status == psutil.CONN_LISTEN and c.laddr.port in ports
             and (c.pid is None or c.pid in own or _owner(c.pid) in uids)]
    return left


def _command(proc: psutil.Process) -> str:
    try:
        return " ".join(proc.cmdline())[:100]
    except psutil.Error:
        return "(exited)"


def _owner(pid: int) -> int | None:
    try:
        return psutil.Process(pid).uids().real
    except psutil.Error:
        return None


# ----------------------------------------------------------------- the run
def conditions() -> dict[str, Any]:
    """The machine as the run meets it: other sessions' clusters and hubs use it too."""
    others = [p for p in psutil.process_iter(["name"]) if p.info["name"] == "kube-apiserver"]
    return {"cpus": os.cpu_count(), "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
            "mem_available_mib": mem_available_mib(), "load_avg": [round(x, 2) for x in os.getloadavg()],
            "lab_clusters_running": len(others), "python": platform.python_version(),
            "provider": os.environ.get("KRMCOURSE_PROVIDER", "kwok")}


def table(rooms: list[dict[str, Any]]) -> None:
    print()
    print(f"{'N':>3} {'RSS/learner':>12} {'PSS/learner':>12} {'own/learner':>12} {'hub+proxy':>10} "
          f"{'idle CPU':>9} {'MemAvail':>9} {'drop':>6} {'last up':>8} {'failed':>7}   MiB, cores, s")
    for r in rooms:
        idle, burst = r.get("idle"), r.get("burst") or r.get("up") or {}
        if not idle:
            print(f"{r['learners']:>3}   FAILED: {r.get('error', '?').splitlines()[0][:150]}")
            continue
        print(f"{r['learners']:>3} {idle['rss_mib']['median']:>12} {idle['pss_mib']['median']:>12} "
              f"{idle['anon_mib']['median']:>12} {idle['hub_and_proxy']['pss_mib']:>10} "
              f"{idle['idle_cpu_cores']:>9} {idle['mem_available_mib']:>9.0f} {idle['mem_available_drop_mib']:>6} "
              f"{burst.get('last_ready_s')!s:>8} {len(burst.get('failures', {})):>7}")
        parts = ", ".join(f"{part} {got.get('median')}" for part, got in idle["pss_mib_by_part"].items())
        print(f"{'':>3} PSS per learner by part (medians): {parts}")
    print("(per learner: medians; hub+proxy: PSS; idle CPU: the whole room's; MemAvail: with the room idle, 'drop': "
          "since before the room; 'last up': until the last lab was ready)")


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt  # SIGTERM takes the room apart as Ctrl-C does


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--learners", type=int, nargs="+", default=[3], help="room sizes, one room each (e.g. 5 10 20)")
    parser.add_argument("--lab", default=DEFAULT_LAB)
    parser.add_argument("--burst", action=argparse.BooleanOptionalAction, default=True,
                        help="release every learner's up at once (default), or --no-burst: --at-once at a time")
    parser.add_argument("--at-once", type=int, default=4, help="servers (and, without --burst, ups) started at once")
    parser.add_argument("--settle", type=float, default=30.0, help="seconds the room idles before it is measured")
    parser.add_argument("--window", type=float, default=30.0, help="seconds over which idle CPU is measured")
    parser.add_argument("--cull-rounds", type=int, default=0, metavar="R",
                        help="instead: R rounds of one room (the first --learners) working, walking away and being "
                             "culled, checked for leaks after each")
    parser.add_argument("--cull-timeout", type=int, default=240,
                        help="the culler's idle timeout for --cull-rounds: the hub learns of activity only every "
                             "5 min, so a round's work must fit in it")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit(f"benchmarks/room.py runs a hub: {hub.ROOT_HINT}")
    try:
        catalog.get(args.lab)
    except KrmcourseError as error:
        raise SystemExit(f"--lab {args.lab}: {error}") from error
    if not hub.proxy_command().exists():
        raise SystemExit(f"The hub's downloads are not in {hub.downloads_dir()}: run 'krmcourse hub prepare'.")
    # Its own KRMCOURSE_HOME: hub.py keeps one hub per state folder, and this one is never another's.
    base = Path(tempfile.mkdtemp(prefix="krmcourse-room-", dir="/tmp"))
    os.chmod(base, 0o755)  # learners enter it, to reach their homes and the shared environment
    os.environ["KRMCOURSE_HOME"] = str(base / "state")
    signal.signal(signal.SIGTERM, _interrupt)
    at_start, rooms, started = conditions(), [], time.strftime("%Y-%m-%d %H:%M")
    if args.cull_rounds:
        try:
            culling = cull_rounds(args.learners[0], args.cull_rounds, args, base)
        finally:
            with uninterrupted():
                shutil.rmtree(base, ignore_errors=True)
        save("room_culling", {"date": started, "lab": args.lab, "at_once": args.at_once, "machine_at_start": at_start,
                              "machine_at_end": conditions(), **culling})
        bad = [r for r in culling["rounds"] if r["leaks"]]
        print(f"{len(culling['rounds'])} of {args.cull_rounds} rounds ran; rounds with leaks: {len(bad)}; left after "
              f"the room was taken apart: {culling['left_behind'] or 'nothing'}")
        if bad or "error" in culling or culling["left_behind"]:
            sys.exit(1)
        return
    try:
        for learners in sorted(set(args.learners)):
            rooms.append(measure_room(learners, args, base))
    except KeyboardInterrupt:
        print("interrupted: the room was taken apart (above)", flush=True)
        rooms.append({"interrupted": True})
    finally:
        with uninterrupted():
            shutil.rmtree(base, ignore_errors=True)
    cores = os.cpu_count() or 1
    for r in rooms:
        if r.get("idle"):
            r["fits"] = fits(r["mem_available_before_mib"], r["idle"]["pss_mib"]["median"],
                             r["idle"]["idle_cpu_cores"], r["learners"], cores)
    measured = [r for r in rooms if "learners" in r]
    table(measured)
    for r in measured:
        if "fits" in r:
            print(f"N={r['learners']}: extrapolated, memory holds {r['fits']['by_memory']} learners (MemAvailable "
                  f"before / PSS per learner), idle CPU {r['fits']['by_idle_cpu']} (idle CPU at half the cores)")
    if not any("learners" in r for r in rooms):
        sys.exit(1)  # interrupted before any room was measured: nothing to record
    save("room", {"date": started, "lab": args.lab, "burst": args.burst, "at_once": args.at_once,
                  "settle_s": args.settle, "window_s": args.window, "machine_at_start": at_start,
                  "machine_at_end": conditions(), "rooms": rooms})
    if any("error" in r or r.get("left_behind") or r.get("interrupted") for r in rooms):
        sys.exit(1)


if __name__ == "__main__":
    main()
