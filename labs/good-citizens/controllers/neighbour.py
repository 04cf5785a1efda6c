"""A neighbour on the shared API server: a client that sends one kind of request, over and over, and keeps
no metrics of its own (exercise noisy-neighbour, G1).

What it asks for is in the JSON file named by its only argument (``{"path": ..., "pause": ...}``), read
again before every request, so a new draw takes effect without a restart. It prints nothing about it:
the only record of its load is the one kube-apiserver keeps.

Run it with KUBECONFIG set; ``lab.run_controller`` does that.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from krmcourse.apiload import RestClient


def main(config: Path) -> None:
    rest = RestClient(Path(os.environ["KUBECONFIG"]))
    print("neighbour: running", flush=True)
    while True:
        try:
            wanted = json.loads(config.read_text())
            rest.call("GET", wanted["path"])
            pause = float(wanted.get("pause", 0.1))
        except (OSError, ValueError, KeyError):
            pause = 1.0  # the file is being rewritten, or the API server restarts: try again in a moment
        except Exception:  # noqa: BLE001 - a dropped connection is not the end of a neighbour
            pause = 1.0
        time.sleep(pause)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
