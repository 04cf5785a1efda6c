"""Where krmcourse keeps its files, per user, and never inside ``~/.kube``.

- the toolchain cache (binaries keyed by version): ``$KRMCOURSE_CACHE`` or ``~/.cache/krmcourse``;
- cluster state (one folder per lab cluster): ``$KRMCOURSE_HOME`` or ``~/.local/state/krmcourse``;
- the labs: ``$KRMCOURSE_LABS`` or the ``labs/`` folder beside the package;
- the notebooks: ``$KRMCOURSE_NOTEBOOKS`` or the ``notebooks/`` folder beside the package;
- locks shared by everyone on the machine (the ports a cluster picks): ``$KRMCOURSE_LOCKS`` or the
  system's temporary folder, for every user alike (see :func:`file_lock`). A workshop hub makes the
  ports lock there itself, as root, so that no learner can remove or replace it.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path


def cache_dir() -> Path:
    if env := os.environ.get("KRMCOURSE_CACHE"):
        return Path(env).expanduser().resolve()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "krmcourse"


#: Set by :func:`state_of`.
_STATE_OF: ContextVar[Path | None] = ContextVar("krmcourse_state_of", default=None)


def state_dir() -> Path:
    if (folder := _STATE_OF.get()) is not None:
        return folder
    if env := os.environ.get("KRMCOURSE_HOME"):
        return Path(env).expanduser().resolve()
    base = os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state"
    return Path(base) / "krmcourse"


@contextmanager
def state_of(folder: Path) -> Iterator[None]:
    """:func:`state_dir` is ``folder`` while the block runs, in this thread or task only: to read another
    user's clusters and checks (the hub's instructor view reads each learner's). The process's
    environment is left alone, so a program the block starts still sees the caller's own state folder."""
    token = _STATE_OF.set(Path(folder))
    try:
        yield
    finally:
        _STATE_OF.reset(token)


def labs_dir() -> Path:
    if env := os.environ.get("KRMCOURSE_LABS"):
        return Path(env).expanduser().resolve()
    return Path(__file__).resolve().parent.parent / "labs"


def notebooks_dir() -> Path:
    if env := os.environ.get("KRMCOURSE_NOTEBOOKS"):
        return Path(env).expanduser().resolve()
    return Path(__file__).resolve().parent.parent / "notebooks"


def locks_dir() -> Path:
    if env := os.environ.get("KRMCOURSE_LOCKS"):
        return Path(env).expanduser().resolve()
    return Path(tempfile.gettempdir())


def private_file(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` readable by the owner only (kubeconfigs hold credentials)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.chmod(path, 0o600)
    return path


def _lock_handle(path: Path) -> int:
    """A descriptor to lock ``path`` through, the file made if missing.

    It opens the file read-only (``flock`` needs no more), and asks for no creation when the file is
    there: in a sticky folder such as ``/tmp``, ``fs.protected_regular`` refuses an open that may create
    on a file another user made, even to root. A file it makes is readable by all, so that every user
    of the machine can lock it too."""
    while True:
        try:
            return os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            pass
        if (fd := create_readable(path)) is not None:
            return fd
        # made by somebody else just now: open theirs


def create_readable(path: Path) -> int | None:
    """Make the file ``path``, readable by all whatever the umask, and return a read-only descriptor of it;
    None when the file is there already (``O_EXCL``: never one somebody else made, nor through a link)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    except FileExistsError:
        return None
    os.fchmod(fd, 0o644)
    return fd


@contextmanager
def file_lock(path: Path, waiting: Callable[[], None] | None = None,
              remove: Callable[[], bool] | None = None) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created if missing) while the block runs; wait for it first.

    The lock is machine-wide for everyone who uses the same path, and the kernel drops it when its
    holder dies, so a crash never leaves it stuck. ``waiting`` is called once if another holder has it
    (to say so). If ``remove`` says so when the block ends, the lock file is deleted, still locked: a
    waiter then finds its file gone and locks a fresh one, so two holders never overlap.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        with os.fdopen(_lock_handle(path)) as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if waiting is not None:
                    waiting()
                    waiting = None
                fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                current = os.stat(path).st_ino == os.fstat(fh.fileno()).st_ino
            except FileNotFoundError:
                current = False
            if not current:
                continue  # the holder we waited for removed it: lock the file that is there now
            try:
                yield
            finally:
                if remove is not None and remove():
                    path.unlink(missing_ok=True)
                fcntl.flock(fh, fcntl.LOCK_UN)
            return
