"""A controller's log, as a lab keeps it: one whole line per message, whichever thread wrote it.

The slow-infrastructure notebook counts the Server controller's "callback:" lines, which its HTTP
callback threads write while its event loop logs too. Lines that ran together made that count wrong.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

THREADS, LINES = 4, 4000

#: Several threads log at once into stdout, which is a file, unbuffered: as a lab runs its controllers.
SCRIPT = f"""
import threading
from krmcourse.controllerkit import log

def write(thread):
    for line in range({LINES}):
        log("callback:", thread, line)

threads = [threading.Thread(target=write, args=(n,)) for n in range({THREADS})]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
"""

LINE = re.compile(r"\d\d:\d\d:\d\d\.\d{3} callback: (\d+) (\d+)")


def test_lines_logged_from_several_threads_at_once_stay_whole(tmp_path: Path) -> None:
    log = tmp_path / "controller.log"
    with log.open("ab") as out:
        subprocess.run([sys.executable, "-c", SCRIPT], stdout=out, stderr=subprocess.PIPE, check=True,
                       env={**os.environ, "PYTHONUNBUFFERED": "1"}, timeout=120)
    lines = log.read_text().splitlines()
    broken = [line for line in lines if not LINE.fullmatch(line)]
    assert not broken, f"{len(broken)} of {len(lines)} lines ran together, for example: {broken[:3]}"
    written = sorted((int(m[1]), int(m[2])) for m in map(LINE.fullmatch, lines) if m)
    assert written == [(thread, line) for thread in range(THREADS) for line in range(LINES)]
