"""The code, notebooks included, stays ruff-clean, and krmcourse passes ``mypy --strict`` (the rules of both
are in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_finds_nothing() -> None:
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", str(ROOT)], capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stdout[-3000:]


def test_mypy_strict_finds_nothing(tmp_path: Path) -> None:
    # From the project root, so that mypy reads [tool.mypy] in pyproject.toml; its cache goes to tmp_path.
    done = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "mypy-cache"),
                           str(ROOT / "krmcourse")], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
