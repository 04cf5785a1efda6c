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


#: What issue 18's gates forbid, spelt in two halves so that neither this test nor the issue's own grep
#: of labs/ and tests/ finds them here.
IMPORT_PATH_EDITS = "sys." + "path"
PROVIDER_NAME_CHECKS = "provider.name " + "=="


def _lines_with(text: str, *folders: str) -> list[str]:
    found = []
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.is_file() and path.suffix in (".py", ".md", ".ipynb", ".yaml"):
                found += [f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
                          for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1) if text in line]
    return found


def test_only_the_loader_touches_the_import_path_and_no_code_asks_a_providers_name() -> None:
    edits = _lines_with(IMPORT_PATH_EDITS, "labs", "tests")
    assert not edits, ("load a lab's modules with lab.support(), a script with krmcourse.labcode.script_module(): "
                       + "\n".join(edits))
    checks = _lines_with(PROVIDER_NAME_CHECKS, "krmcourse", "labs")
    assert not checks, "ask the provider what it can do (Provider.can), not its name:\n" + "\n".join(checks)
