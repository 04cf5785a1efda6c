"""Locks that several users share, in a sticky folder such as /tmp: the ports lock every cluster of the
machine picks its ports under (a hub's learners' and root's own)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from krmcourse import hub
from krmcourse.paths import file_lock
from krmcourse.providers.kwok import PORTS_LOCK

#: Another user: nobody.
OTHER = 65534

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="makes files as another user, so it needs root")


@pytest.fixture
def sticky() -> Iterator[Path]:
    """A folder like /tmp: anyone may write, only a file's owner may remove it (fs.protected_regular
    applies to it too)."""
    folder = Path(tempfile.mkdtemp(prefix="krmcourse-locks-", dir="/tmp"))
    folder.chmod(0o1777)
    yield folder
    shutil.rmtree(folder)


def as_other(action: Callable[[], None]) -> int:
    """Run ``action`` in a child process as the other user: its exit code (1 if it raised)."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setgid(OTHER)
            os.setuid(OTHER)
            action()
            code = 0
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def test_a_lock_file_another_user_made_is_locked_not_refused(sticky: Path) -> None:
    path = sticky / PORTS_LOCK
    path.touch()
    os.chown(path, OTHER, OTHER)
    with file_lock(path):
        assert path.stat().st_uid == OTHER, "the file was replaced, not locked"


def test_another_user_waits_for_a_lock_root_holds_and_then_takes_it(sticky: Path) -> None:
    path = sticky / PORTS_LOCK

    def lock_or_say_it_waits() -> None:
        with file_lock(path, waiting=lambda: os._exit(3)):
            pass

    with file_lock(path):
        assert path.stat().st_mode & 0o777 == 0o644, "a lock file is made readable (so lockable) by all"
        assert as_other(lock_or_say_it_waits) == 3, "the other user did not wait for root's lock"
    assert as_other(lock_or_say_it_waits) == 0, "the other user could not take the lock once root let it go"


def test_the_hub_makes_the_ports_lock_root_owns_in_place_of_a_learners(sticky: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KRMCOURSE_LOCKS", str(sticky))
    made = sticky / PORTS_LOCK
    made.touch()
    os.chown(made, OTHER, OTHER)  # a learner's, from before the hub started: they could remove or replace it
    hub._shared_locks()
    assert (made.stat().st_uid, made.stat().st_mode & 0o777) == (0, 0o644)
    assert as_other(made.unlink) == 1, "a learner removed the hub's ports lock"
    assert as_other(lambda: take(made)) == 0, "a learner cannot take the hub's ports lock"


def test_a_learner_who_makes_the_lock_again_while_the_hub_replaces_it_does_not_stop_the_hub(
        sticky: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KRMCOURSE_LOCKS", str(sticky))
    made = sticky / PORTS_LOCK
    made.touch()
    os.chown(made, OTHER, OTHER)
    unlink, remade = Path.unlink, []

    def learner_makes_it_again(path: Path, missing_ok: bool = False) -> None:
        unlink(path, missing_ok)
        if path == made and not remade:  # once, between the hub's unlink and its own create
            remade.append(as_other(made.touch))

    monkeypatch.setattr(Path, "unlink", learner_makes_it_again)
    hub._shared_locks()
    assert remade == [0], "the learner's file was not made again in between"
    assert (made.stat().st_uid, made.stat().st_mode & 0o777) == (0, 0o644)


def take(path: Path) -> None:
    """Take the lock on ``path`` and leave it to the process's exit to let go."""
    with file_lock(path):
        os._exit(0)
