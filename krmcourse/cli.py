"""The ``krmcourse`` command. Every subcommand is a thin layer over the Python API.

Exit codes: 0 success; 1 an exercise check failed (or sync-notebooks --check found a notebook to
rewrite); 2 bad input (unknown lab, exercise, option); 3 toolchain (Go missing or too old, build
failed); 4 provider (none usable, Docker absent, port in use); 5 cluster (the lab is not up, failed to start,
unhealthy, broken state); 6 kubectl failed; 7 a wait ran out of time; 8 the workshop hub (krmcourse hub) could not
be set up, started or stopped; 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from . import catalog, doctor, paths, toolchain, workshop
from .errors import KrmcourseError, UsageError
from .lab import Lab, lock_path, recorded
from .providers import Provider, owning_providers

FIRST_LAB = "welcome"


def _say(msg: str) -> None:
    print(msg, flush=True)


def _lab(args: argparse.Namespace) -> Lab:
    return Lab(args.lab, instance=getattr(args, "instance", None), provider=getattr(args, "provider", None),
               say=_say)


def _up_lab(args: argparse.Namespace) -> Lab:
    """The command's lab, which must be up (Lab.require_up). ``check`` and ``solve`` meet the same
    precondition in Lab.check and Lab.solve, once the exercise is known to exist."""
    return _lab(args).require_up()


def cmd_up(args: argparse.Namespace) -> int:
    lab = _lab(args).up(at=args.at, port=args.port)
    print(f"export KUBECONFIG={lab.kubeconfig}")
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    if args.all:
        for provider, cluster in _running_clusters():
            _down_cluster(provider, cluster)
        return 0
    if not args.lab:
        raise UsageError("Name a lab to take down, or use --all.", "krmcourse down LAB (krmcourse status lists them)")
    _lab(args).down()
    return 0


def _running_clusters() -> list[tuple[Provider, str]]:
    """Every cluster of this state folder, on every provider that owns its clusters."""
    return [(provider, cluster) for provider in owning_providers() for cluster in provider.clusters()]


def _recorded_lab(provider: Provider, cluster: str) -> Lab | None:
    """The lab (and instance) a cluster of this state folder was made for, as its record says; None when
    it has no record, or names a lab this course no longer has."""
    record = recorded(cluster)
    if record and record["lab"] in catalog.names():
        return Lab(record["lab"], instance=record.get("instance"), provider=provider, say=_say)
    return None


def _down_cluster(provider: Provider, cluster: str) -> None:
    """Take a cluster down, through its lab when the record says which, else by the provider alone."""
    if lab := _recorded_lab(provider, cluster):
        lab.down()
        return
    provider.delete(cluster)
    lock_path(cluster).unlink(missing_ok=True)
    print(f"cluster {cluster} deleted")


def cmd_reset(args: argparse.Namespace) -> int:
    lab = _lab(args).reset(at=args.at)
    print(f"export KUBECONFIG={lab.kubeconfig}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    if args.lab:
        labs = [_lab(args)]
    else:  # every cluster of this state folder, of any instance (or only of --instance)
        labs = [lab for provider, cluster in _running_clusters() if (lab := _recorded_lab(provider, cluster))
                and args.instance in (None, lab.instance)]
    rows = [lab.status() for lab in labs]
    for name, version, built, _folder in toolchain.describe():
        print(f"toolchain {name} {version}: {'built' if built else 'NOT BUILT'}")
    if not rows:
        print("No lab cluster is running. Start one with 'krmcourse up LAB'.")
        return 0
    for row in rows:
        comps = " ".join(f"{c}={'up' if ok else 'DOWN'}" for c, ok in row["components"].items())
        state = "ready" if row["ready"] else ("not running" if not row["exists"] else "UNHEALTHY")
        print(f"{row['lab']:<24} {row['cluster']:<28} {row['provider']:<8} {state:<11} {comps}")
        if row["processes"]:
            running = " ".join(f"{name}(pid {pid})" for name, pid in row["processes"].items())
            print(f"{'':<24} controllers: {running}  (their output: krmcourse logs LAB NAME)")
    return 0 if all(r["ready"] for r in rows) else 5


def cmd_logs(args: argparse.Namespace) -> int:
    lab = Lab(args.lab, instance=args.instance, say=_say)
    if args.process is None:
        running = lab.running()
        for name, pid in running.items():
            print(f"{name:<24} pid {pid}")
        if not running:
            print(f"Lab {lab.name} runs no controller now.")
        return 0
    print(lab.logs(args.process, lines=args.lines))
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    for spec in catalog.all_labs():
        m = spec.minutes
        concepts = ",".join(spec.concepts) or "-"
        print(f"{spec.name:<24} {m['teaching']:>3}+{m['exercises']:<3} min  {concepts:<22} {spec.title}")
    return 0


def cmd_env(args: argparse.Namespace) -> int:
    lab = _up_lab(args)
    print(f"export KUBECONFIG={lab.kubeconfig}")
    return 0


def cmd_kubectl(args: argparse.Namespace) -> int:
    lab = _up_lab(args)
    from .kubectl import kubectl_binary

    cache = lab.kubeconfig.parent / ".kubectl-cache"
    return subprocess.call([str(kubectl_binary()), "--kubeconfig", str(lab.kubeconfig), f"--cache-dir={cache}",
                            *args.args])


def cmd_exercises(args: argparse.Namespace) -> int:
    spec = catalog.get(args.lab)
    for ex in spec.exercises:
        print(f"{ex.id:<28} {ex.minutes:>3} min  {ex.title}")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    _lab(args).check(args.exercise)
    return 0


def cmd_solve(args: argparse.Namespace) -> int:
    lab = _lab(args)
    lab.solve(args.exercise)
    print(f"Applied the reference solution of {args.exercise}; its check passes.")
    return 0


def cmd_progress(args: argparse.Namespace) -> int:
    rows = workshop.progress(args.labs or None, run=args.run)
    if args.json:
        print(json.dumps({"user": os.environ.get("USER", ""), "rows": rows}, indent=2))
    else:
        for r in rows:
            when = r["checked"][11:19]  # the time of day of the ISO timestamp, UTC
            print(f"{r['lab']:<24} {r['exercise']:<28} {r['state']:<9} {when:<8} {r['hint'][:70]}")
    return 0


def cmd_schedule(args: argparse.Namespace) -> int:
    print(workshop.format_schedule(workshop.schedule(start_minutes=args.start * 60)))
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    if args.fix:
        for line in doctor.fix() or ["nothing to fix"]:
            print(line)
    findings = doctor.examine()
    for f in findings:
        print(f"{'ok ' if f.ok else 'BAD'} {f.what}" + ("" if f.ok or not f.fix else f"\n    -> {f.fix}"))
    return 0 if all(f.ok for f in findings) else 1


def cmd_toolchain(args: argparse.Namespace) -> int:
    provider = args.provider or os.environ.get("KRMCOURSE_PROVIDER") or "kwok"
    if args.action == "install":
        toolchain.install(_say, force=args.force, provider=provider)
    else:
        for name, version, built, folder in toolchain.describe(provider):
            print(f"{name:<16} {version:<10} {'built' if built else 'not built':<10} {folder}")
        if provider == "kind":
            from . import nodeimage

            image = nodeimage.chosen_image() or "kind's published image (KRMCOURSE_KIND_IMAGE=published)"
            print(f"{'node image':<16} {'':<10} {'ready' if nodeimage.ready() else 'not made':<10} {image}")
    return 0


def cmd_dataset(args: argparse.Namespace) -> int:
    from .ecosystem import rebuild

    return rebuild.main(args.args)


def cmd_new_lab(args: argparse.Namespace) -> int:
    from . import scaffolding

    concepts = [c for c in args.concepts.replace(",", " ").split() if c] if args.concepts else []
    made = scaffolding.new_lab(args.name, concepts=concepts, title=args.title, number=args.number,
                               after=args.after, part=args.part)
    name, exercise = made.spec.name, made.spec.exercises[0].id
    print(f"Created lab {name} and its notebook {made.notebook.name}:")
    for path in made.files:
        print(f"  {path}")
    print(f"Next: krmcourse up {name}; krmcourse check {name} {exercise} (fails with a hint); "
          f"krmcourse solve {name} {exercise}; check again (passes).")
    print(f"Test: pytest tests/test_exercises.py -k {name}; "
          f"pytest --nbval-lax --nbval-current-env {made.notebook}")
    return 0


def cmd_sync_notebooks(args: argparse.Namespace) -> int:
    from . import notebook_cells

    differing = notebook_cells.sync_all(check=args.check)
    for path, fields in differing.items():
        print(f"{path}: {'differs from' if args.check else 'rewrote from'} lab.yaml in {', '.join(fields)}")
    if args.check and differing:
        print("Run 'krmcourse sync-notebooks' to write them from lab.yaml.", file=sys.stderr)
        return 1
    if not differing:
        print("Every notebook's first and last cells agree with its lab.yaml.")
    return 0


def cmd_start(args: argparse.Namespace) -> int:
    """Everything a learner needs: toolchain, the first lab, and JupyterLab on the notebooks.

    JupyterLab listens on 127.0.0.1 only and asks for the token it prints; the course's own Jupyter
    settings (no news pop-up, readable exercise hints) are written into the environment first.
    """
    from . import jupyter

    if args.port is not None:
        jupyter.require_free_port(args.port)  # before the slow part, so a taken port fails at once
    provider = os.environ.get("KRMCOURSE_PROVIDER") or "kwok"
    if provider in ("kwok", "kind"):
        toolchain.install(_say, provider=provider)
    Lab(FIRST_LAB, say=_say).up()
    if args.no_browser_lab:
        return 0
    jupyter.install_settings(_say)
    notebooks = paths.notebooks_dir()
    if jupyter.running_as_root():
        _say("Running as root: starting JupyterLab with --allow-root.")
    return jupyter.run_lab(jupyter.lab_command(notebooks, port=args.port, open_browser=not args.no_browser))


def cmd_hub(args: argparse.Namespace) -> int:
    from . import hub

    if args.action == "prepare":
        hub.prepare(_say, python=args.python)
    elif args.action == "start":
        if args.learners is None:
            raise UsageError("How many learners?", "krmcourse hub start --learners N")
        hub.start(args.learners, prefix=args.prefix, homes=args.homes, port=args.port,
                  learner_prefix=args.learner_prefix, admin=args.admin, python=args.python,
                  max_labs=args.max_labs, idle_timeout=args.idle_timeout, say=_say)
    elif args.action == "stop":
        for line in hub.stop(remove_accounts=args.remove_accounts, say=_say):
            print(f"had to kill: {line}")
    elif args.action == "status":
        return 0 if hub.status(_say) else 1
    else:
        if not args.name:
            raise UsageError(f"Name the learner: krmcourse hub {args.action} NAME.", "krmcourse hub status lists them")
        (hub.add_learner if args.action == "add-learner" else hub.remove_learner)(args.name, _say)
    return 0


def cmd_image(args: argparse.Namespace) -> int:
    from . import userimage

    if args.action == "build":
        print(userimage.build(_say, force=args.force))
    else:
        print(userimage.image_tag())
    return 0


def port_number(text: str) -> int:
    """A TCP port from the command line: 0 (any free port) to 65535."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port: use a number from 1 to 65535, or 0 for any "
                                         "free port")
    return port


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="krmcourse", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    def lab_cmd(name: str, fn: Callable[[argparse.Namespace], int], help: str,
                lab_required: bool = True, needs_cluster: bool = False) -> argparse.ArgumentParser:
        """A command on one lab; ``needs_cluster``: it works on the lab's cluster, which must be up
        (LabNotUpError otherwise; tests/test_bad_input.py tries each such command on a lab that is down)."""
        p = sub.add_parser(name, help=help)
        p.add_argument("lab", nargs=None if lab_required else "?", help="lab name (see 'krmcourse list')")
        p.add_argument("--instance", help="a second cluster of the same lab, e.g. 'east'")
        p.add_argument("--provider", choices=["kwok", "kind", "existing"],
                       help="where the cluster comes from (default: $KRMCOURSE_PROVIDER, else automatic)")
        p.set_defaults(fn=fn, needs_cluster=needs_cluster)
        return p

    p = lab_cmd("up", cmd_up, "bring a lab's cluster up (reusing a healthy one)")
    p.add_argument("--at", help="start at this exercise, with every earlier one solved")
    p.add_argument("--port", type=port_number, help="API server port (default: a free one)")
    p = lab_cmd("down", cmd_down, "delete a lab's cluster and everything it started", lab_required=False)
    p.add_argument("--all", action="store_true", help="every lab cluster")
    p = lab_cmd("reset", cmd_reset, "recreate a lab's cluster from scratch")
    p.add_argument("--at", help="start at this exercise, with every earlier one solved")
    lab_cmd("status", cmd_status, "health of running lab clusters", lab_required=False)
    lab_cmd("env", cmd_env, "print the export line for a lab's KUBECONFIG", needs_cluster=True)
    p = lab_cmd("logs", cmd_logs, "the lab's running controllers, or the last lines one of them wrote")
    p.add_argument("process", nargs="?", help="a controller's name (without it: the running ones)")
    p.add_argument("--lines", type=int, default=40, help="how many lines (default 40)")
    p = lab_cmd("kubectl", cmd_kubectl, "run kubectl against a lab's cluster", needs_cluster=True)
    p.add_argument("args", nargs=argparse.REMAINDER)
    p = lab_cmd("check", cmd_check, "check an exercise against the cluster", needs_cluster=True)
    p.add_argument("exercise")
    p = lab_cmd("solve", cmd_solve, "apply an exercise's reference solution", needs_cluster=True)
    p.add_argument("exercise")
    p = sub.add_parser("exercises", help="list a lab's exercises")
    p.add_argument("lab")
    p.set_defaults(fn=cmd_exercises)
    sub.add_parser("list", help="list the labs").set_defaults(fn=cmd_list)
    p = sub.add_parser("progress", help="what each exercise's last check said (instructors: who is stuck)")
    p.add_argument("labs", nargs="*")
    p.add_argument("--json", action="store_true")
    p.add_argument("--run", action="store_true",
                   help="run every check again now (some make load on the lab or restart its controllers)")
    p.set_defaults(fn=cmd_progress)
    p = sub.add_parser("schedule", help="a workshop schedule built from the labs' minutes")
    p.add_argument("--start", type=int, default=9, help="start hour (default 9)")
    p.set_defaults(fn=cmd_schedule)
    p = sub.add_parser("doctor", help="report what is missing or leaked, and how to fix it")
    p.add_argument("--fix", action="store_true", help="stop leaked processes, remove broken clusters")
    p.set_defaults(fn=cmd_doctor)
    p = sub.add_parser("toolchain", help="build or show the lab control plane binaries")
    p.add_argument("action", choices=["install", "status"])
    p.add_argument("--force", action="store_true", help="rebuild even if built")
    p.add_argument("--provider", choices=["kwok", "kind"],
                   help="what to build for (default: $KRMCOURSE_PROVIDER, else kwok); kind adds kind, the "
                        "node's programs and a node image made here")
    p.set_defaults(fn=cmd_toolchain)
    p = sub.add_parser("dataset", help="rebuild the ecosystem tables in datasets/ (--check: compare only)")
    p.add_argument("action", choices=["rebuild"])
    p.add_argument("args", nargs=argparse.REMAINDER, help="passed to the rebuild, e.g. --check")
    p.set_defaults(fn=cmd_dataset)
    p = sub.add_parser("new-lab", help="scaffold a lab folder and its notebook, with one working exercise")
    p.add_argument("name", help="the lab's name: lowercase words joined by hyphens, e.g. status-conditions")
    p.add_argument("--concepts", help="concept IDs of the course outline it teaches, e.g. C4,P2 (required)")
    p.add_argument("--title", help="the lab's title (default: its name, in words)")
    place = p.add_mutually_exclusive_group()
    place.add_argument("--number", type=int, help="the notebook's number, 00-99 (default: after the last one)")
    place.add_argument("--after", metavar="LAB", help="take the number right after this lab's notebook")
    p.add_argument("--part", help="the course part, I-VII (default: the part of the lab before it)")
    p.set_defaults(fn=cmd_new_lab)
    p = sub.add_parser("sync-notebooks",
                       help="write each notebook's first and last cells from its lab.yaml, keeping the prose")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 listing the notebooks that differ")
    p.set_defaults(fn=cmd_sync_notebooks)
    p = sub.add_parser("start", help="build what is missing, bring up the first lab, open JupyterLab")
    p.add_argument("--no-browser-lab", action="store_true", help="stop before starting JupyterLab")
    p.add_argument("--no-browser", action="store_true",
                   help="start JupyterLab without opening a web browser; open the address it prints yourself")
    p.add_argument("--port", type=port_number,
                   help="JupyterLab's port on 127.0.0.1 (default: 8888 or the next free one; 0: any free port)")
    p.set_defaults(fn=cmd_start)
    p = sub.add_parser("hub", help="a JupyterHub for a workshop room on this machine (as root): learner "
                                   "accounts, a shared course, PAM logins, on 127.0.0.1")
    p.add_argument("action", choices=["start", "stop", "status", "add-learner", "remove-learner", "prepare"],
                   help="prepare fetches what start needs from PyPI and npm (./course install does it)")
    p.add_argument("name", nargs="?", help="the learner to add or remove")
    p.add_argument("--learners", type=int, help="how many learner accounts to make (start)")
    p.add_argument("--learner-prefix", default="learner", help="learner accounts are PREFIX01, PREFIX02, ...")
    p.add_argument("--admin", help="the hub admin's account (default: PREFIXadmin)")
    p.add_argument("--port", type=port_number, help="the hub's port on 127.0.0.1 (default: a free one)")
    p.add_argument("--prefix", type=Path,
                   help="the shared course environment (default: $KRMCOURSE_HUB_PREFIX, else /opt/krmcourse)")
    p.add_argument("--homes", type=Path, help="where the learners' homes go (default: /home)")
    p.add_argument("--max-labs", type=int, default=3,
                   help="how many lab clusters each learner may keep up at once (default 3)")
    p.add_argument("--idle-timeout", type=int, default=3600, metavar="SECONDS",
                   help="stop a learner's server, and their lab clusters, after this long idle (default 3600)")
    p.add_argument("--python", default="/usr/bin/python3", help="the Python the shared venv is made with")
    p.add_argument("--remove-accounts", action="store_true", help="stop: remove the room's accounts and homes too")
    p.set_defaults(fn=cmd_hub)
    p = sub.add_parser("image", help="the user image for a JupyterHub on Kubernetes (z2jh), made here with Docker "
                                     "(deploy/z2jh/values.yaml runs it)")
    p.add_argument("action", choices=["build", "tag"],
                   help="build: make the image unless one of the same content is there, and print its tag; "
                        "tag: print the tag the course's current files make")
    p.add_argument("--force", action="store_true", help="build: rebuild the base and the image even if there")
    p.set_defaults(fn=cmd_image)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.fn(args))
    except KrmcourseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (krmcourse schedule | head): not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
