"""The Greeting controller written from scratch with kr8s: the lab's `greeter-scratch` (lab.start).

It reads KUBECONFIG from the environment, which the lab sets to the lab's own cluster.
--watch-loop names a file with one async function (a learner's, saved by lab.save_code) that
takes over each informer's watching after its first list: see greeter/informer.py.
Signals: SIGTERM stops it cleanly; SIGUSR1 cuts its watches and keeps them closed for --outage
seconds, as a network partition would, so that the re-list afterwards can be seen in the log.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
import warnings
from pathlib import Path

import kr8s.asyncio
from greeter.controller import Controller

from krmcourse.labcode import saved_function


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--namespace", default=None, help="watch one namespace (default: all)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--watch-timeout",
        type=int,
        default=300,
        help="seconds after which the server closes each watch (timeoutSeconds)",
    )
    parser.add_argument("--outage", type=float, default=5.0, help="seconds to stay disconnected after SIGUSR1")
    parser.add_argument("--http-log", action="store_true", help="log every HTTP request the client makes")
    parser.add_argument(
        "--work-delay",
        type=float,
        default=0.0,
        help="extra seconds per reconcile, to make 'killed mid-work' easy to hit",
    )
    parser.add_argument("--watch-loop", type=Path, default=None,
                        help="a file with one async function (informer, resource_version) that does the watching")
    args = parser.parse_args(argv)
    if args.workers < 1 or args.watch_timeout < 1 or args.outage < 0 or args.work_delay < 0:
        parser.error("--workers and --watch-timeout must be at least 1; --outage and --work-delay >= 0")
    return args


async def main(argv: list[str]) -> None:
    args = parse_args(argv)
    log = logging.getLogger("greeter")
    logging.getLogger("httpx").setLevel(logging.INFO if args.http_log else logging.WARNING)
    api = await kr8s.asyncio.api()
    controller = Controller(
        api,
        log,
        namespace=args.namespace,
        workers=args.workers,
        watch_timeout=args.watch_timeout,
        work_delay=args.work_delay,
        watch_loop=saved_function(args.watch_loop) if args.watch_loop else None,
    )

    def drop_watches() -> None:
        log.info("SIGUSR1: dropping the watches for %.1fs", args.outage)
        controller.greetings.drop_watch(args.outage)
        controller.configmaps.drop_watch(args.outage)

    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, drop_watches)
    log.info("greeter-scratch starting against %s", api.auth.server)
    await controller.run()


if __name__ == "__main__":
    # kr8s warns about Kubernetes versions newer than it was tested with; the lab's works fine.
    warnings.filterwarnings("ignore", message="Kubernetes version .* is not supported")
    logging.basicConfig(
        stream=sys.stdout,
        level=logging.INFO,
        format="%(asctime)s.%(msecs)03d %(levelname)s %(message)s",
        datefmt="%H:%M:%S",
    )
    asyncio.run(main(sys.argv[1:]))
