"""The committed tables are exactly what the pinned sources rebuild to.

This downloads the four pinned source distributions with pip (about 25 MB, cached in
~/.cache/krmcourse/ecosystem), asks `go list -m` for the Kubernetes release tag times, and rebuilds;
set KRMCOURSE_OFFLINE=1 to skip it without a registry.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from krmcourse.ecosystem import rebuild


@pytest.mark.skipif(os.environ.get("KRMCOURSE_OFFLINE") == "1", reason="KRMCOURSE_OFFLINE=1: no registry")
def test_committed_tables_match_a_fresh_rebuild(tmp_path: Path) -> None:
    counts = rebuild.rebuild(tmp_path)
    assert counts["kinds.csv"] > 900 and counts["builtin_kinds.csv"] > 2000
    assert counts[rebuild.RELEASES] == 27
    committed = rebuild.default_out()
    for name in rebuild.GENERATED:
        assert (tmp_path / name).read_bytes() == (committed / name).read_bytes(), (
            f"datasets/{name} differs from a rebuild: run `python -m krmcourse.ecosystem.rebuild`")


def test_cli_offers_the_rebuild() -> None:
    done = subprocess.run([sys.executable, "-m", "krmcourse.cli", "dataset", "rebuild", "--help"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "krmcourse dataset rebuild" in done.stdout and "--check" in done.stdout
