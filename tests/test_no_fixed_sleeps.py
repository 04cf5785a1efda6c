"""No test sleeps a fixed time to wait for something to happen, or not to happen (issue 18).

A test waits on a log line, an event or visible state. A sleep is allowed only as the poll interval
of a loop that checks a condition (as ``Lab.wait_until`` and ``ManagedProcess.wait_for_log`` do); a
sleep on its own is a guess at how fast the machine is. Asserting that something did *not* happen
needs a positive signal that the system had its chance first: a later log line, a later pass, an
observedGeneration that caught up.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
MODULES = ("time", "asyncio")


class _FixedSleeps(ast.NodeVisitor):
    """Collects the line of every ``time.sleep``/``asyncio.sleep`` call that is not in a loop's body."""

    def __init__(self) -> None:
        self.lines: list[int] = []
        self.loops = 0
        self.modules: set[str] = set()  # local names of the time and asyncio modules
        self.sleeps: set[str] = set()  # local names of their sleep functions

    def visit_Import(self, node: ast.Import) -> None:  # noqa: N802 - ast.NodeVisitor's naming
        self.modules |= {a.asname or a.name for a in node.names if a.name in MODULES}

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:  # noqa: N802
        if node.module in MODULES:
            self.sleeps |= {a.asname or a.name for a in node.names if a.name == "sleep"}

    def _loop(self, node: ast.For | ast.AsyncFor | ast.While) -> None:
        for part in (node.test,) if isinstance(node, ast.While) else (node.target, node.iter):
            self.visit(part)
        self.loops += 1
        for stmt in node.body:
            self.visit(stmt)
        self.loops -= 1
        for stmt in node.orelse:  # runs once, after the loop: not a poll interval
            self.visit(stmt)

    visit_For = visit_AsyncFor = visit_While = _loop

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        outer, self.loops = self.loops, 0  # a function defined in a loop does not run as its poll
        self.generic_visit(node)
        self.loops = outer

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def visit_Call(self, node: ast.Call) -> None:  # noqa: N802
        func = node.func
        is_sleep = (isinstance(func, ast.Attribute) and func.attr == "sleep" and isinstance(func.value, ast.Name)
                    and func.value.id in self.modules) or (isinstance(func, ast.Name) and func.id in self.sleeps)
        if is_sleep and not self.loops:
            self.lines.append(node.lineno)
        self.generic_visit(node)


def fixed_sleeps(path: Path) -> list[str]:
    """``file:line`` of every sleep in ``path`` that is not the poll interval of a loop."""
    finder = _FixedSleeps()
    finder.visit(ast.parse(path.read_text(), filename=str(path)))
    return [f"{path.name}:{line}" for line in finder.lines]


def test_no_test_sleeps_a_fixed_time() -> None:
    found = [hit for path in sorted(TESTS.rglob("*.py")) for hit in fixed_sleeps(path)]
    assert not found, ("these sleeps wait a fixed time; wait on a log line, an event or visible state instead "
                       "(Lab.wait_until, ManagedProcess.wait_for_log, Lab.wait_for): " + ", ".join(found))


def test_the_check_finds_a_bare_sleep_and_allows_a_poll_interval(tmp_path: Path) -> None:
    sample = tmp_path / "test_sample.py"
    sample.write_text(
        "import asyncio\n"
        "import time as clock\n"
        "from time import sleep as nap\n"
        "\n"
        "def test_guesses():\n"
        "    clock.sleep(2)\n"  # line 6: give it time
        "    nap(1)\n"  # line 7: the same, imported by name
        "\n"
        "async def test_guesses_too():\n"
        "    await asyncio.sleep(1)\n"  # line 10
        "\n"
        "def test_polls(ready):\n"
        "    while not ready():\n"
        "        clock.sleep(0.1)\n"  # a poll interval: allowed
        "    for _ in range(3):\n"
        "        pass\n"
        "    else:\n"
        "        clock.sleep(1)\n"  # line 18: after the loop, once
        "    for _ in range(3):\n"
        "        def later():\n"
        "            clock.sleep(1)\n"  # line 21: in a function, not the loop's poll
        "\n"
        "def test_not_a_sleep(proc):\n"
        "    proc.sleep(1)\n"  # someone else's sleep method: not time's
    )
    assert fixed_sleeps(sample) == [f"test_sample.py:{n}" for n in (6, 7, 10, 18, 21)]
