"""Every sentence of the course that credits a talk is in the claims register, and each entry of the
register finds its passage in that talk's transcript (issue 33).

``datasets/claims.yaml`` lists, for each such sentence: where it is (a file, and for a notebook the
cell id), a few of its words (``says``), the talk it credits (2019 or 2023), and a locator in that
talk's transcript, a line number and a few of the transcript's own words (``find``) that occur within
``NEAR`` lines of it. A sentence that names a talk without crediting it with anything (a heading, a
question, the label of a table column) is listed under ``mentions`` with the reason.

Four checks, all offline:

- every sentence that names a talk (``NAMES``), in the files ``scanned()`` reads, holds the ``says`` of
  an entry for its cell or file;
- every entry's ``says`` is still where the entry puts it;
- every claim has a talk and a locator: a claim without one fails, it is never skipped;
- where the transcripts are present (they are not shipped with the course; ``SEEDS`` finds them as
  ``test_talk_claims.py`` does), every locator finds its words near its line.

The last tests feed the same functions a broken register, so each check is shown to fail.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
REGISTER = ROOT / "datasets" / "claims.yaml"
SEEDS = Path(os.environ.get("KRMCOURSE_SEEDS") or ROOT.parent / "shared" / "seeds")
#: How far from its line a locator's words may start or end, in transcript lines (a caption line is short,
#: and a phrase may run over a line break).
NEAR = 2
#: A locator finds a passage; it is not a copy of one.
MAX_FIND_WORDS = 10

#: A sentence that names a talk, its speakers or its captions as a source. "talk to" is the verb.
NAMES = re.compile(
    r"\b(?:the|a|this|that|2019|2023)\s+(?:kubecon\s+)?talks?\b(?!\s+to\b)|\btalk's|\bspeakers?\b|\bspeaker's"
    r"|\bkubecon\b|\btranscripts?\b|\bcaptions?\b",
    re.IGNORECASE)


@dataclass(frozen=True)
class Unit:
    """A notebook cell, or a whole file: the place an entry points at."""

    where: str
    cell: str | None
    text: str

    @property
    def key(self) -> tuple[str, str | None]:
        return (self.where, self.cell)


def scanned() -> list[Path]:
    """The course's texts: notebooks, the labs' texts for learners and instructors, the package's
    docstrings and the dataset's notes."""
    return sorted([*ROOT.glob("notebooks/*.ipynb"), *ROOT.glob("labs/*/lab.yaml"),
                   *ROOT.glob("labs/*/instructor.md"), *ROOT.glob("krmcourse/**/*.py"),
                   ROOT / "datasets" / "README.md", ROOT / "README.md"])


def units(path: Path) -> Iterator[Unit]:
    where = str(path.relative_to(ROOT))
    if path.suffix == ".ipynb":
        for cell in json.loads(path.read_text())["cells"]:
            yield Unit(where, cell.get("id"), "".join(cell["source"]))
    else:
        yield Unit(where, None, path.read_text())


def flat(text: str) -> str:
    return " ".join(text.split()).lower()


def sentences(text: str) -> list[str]:
    """Sentences, roughly, as test_talk_claims splits them: at a full stop, question or exclamation mark,
    at blank lines and at list items and table cells, with line breaks inside a sentence joined."""
    parts = re.split(r"(?<=[.!?])\s+|\n\s*\n|\n\s*[-*|] ", text)
    return [" ".join(p.split()) for p in parts if p.strip()]


def load(path: Path = REGISTER) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict) and {"talks", "claims", "mentions"} <= set(data), (
        f"{path} must hold 'talks', 'claims' and 'mentions' (see the comment at its top)")
    return data


# The checks, as functions of the register (and the course, and the transcripts), so that the tests at
# the end can show each one failing on a broken register.

def incomplete(register: dict[str, Any]) -> list[str]:
    """Entries that lack a field: a claim without its talk or locator is a failure, not a skip."""
    talks = {str(t) for t in register["talks"]}
    wrong = []
    for n, claim in enumerate(register["claims"]):
        missing = [k for k in ("where", "says", "talk", "line", "find") if not claim.get(k)]
        if str(claim.get("where", "")).endswith(".ipynb") and not claim.get("cell"):
            missing.append("cell")
        if missing:
            wrong.append(f"claim {n} ({claim.get('where')}, {claim.get('says')!r}) has no {', '.join(missing)}")
            continue
        if str(claim["talk"]) not in talks:
            wrong.append(f"claim {n} ({claim['says']!r}) credits talk {claim['talk']!r}; the register knows "
                         f"{sorted(talks)}")
        if not isinstance(claim["line"], int) or claim["line"] < 1:
            wrong.append(f"claim {n} ({claim['says']!r}): line must be a line number, not {claim['line']!r}")
        if len(str(claim["find"]).split()) > MAX_FIND_WORDS:
            wrong.append(f"claim {n} ({claim['says']!r}): a locator is a few words that find the passage "
                         f"(at most {MAX_FIND_WORDS}), not the passage itself")
    for n, mention in enumerate(register["mentions"]):
        missing = [k for k in ("where", "says", "why") if not mention.get(k)]
        if missing:
            wrong.append(f"mention {n} ({mention.get('where')}, {mention.get('says')!r}) has no "
                         f"{', '.join(missing)}")
    return wrong


def entries(register: dict[str, Any]) -> list[dict[str, Any]]:
    return [*register["claims"], *register["mentions"]]


def place(entry: dict[str, Any]) -> tuple[str, str | None]:
    """The (file, cell) an entry names; a cell id that YAML reads as a number is still its id."""
    cell = entry.get("cell")
    return (str(entry.get("where")), None if cell is None else str(cell))


def misplaced(register: dict[str, Any], course: list[Unit]) -> list[str]:
    """Entries whose words are no longer in the cell or file they name."""
    found = {u.key: flat(u.text) for u in course}
    wrong = []
    for entry in entries(register):
        key = place(entry)
        if key not in found:
            wrong.append(f"{key[0]}{' cell ' + str(key[1]) if key[1] else ''}: no such file or cell "
                         f"(entry {entry.get('says')!r}); update the register where the text moved")
        elif flat(str(entry.get("says"))) not in found[key]:
            wrong.append(f"{key[0]}{' cell ' + str(key[1]) if key[1] else ''} no longer says "
                         f"{entry.get('says')!r}: update the entry, or remove it with the sentence")
    return wrong


def unregistered(register: dict[str, Any], course: list[Unit]) -> list[str]:
    """Sentences that name a talk and hold the words of no entry for their cell or file."""
    said: dict[tuple[str, str | None], list[str]] = {}
    for entry in entries(register):
        said.setdefault(place(entry), []).append(flat(str(entry.get("says"))))
    wrong = []
    for unit in course:
        for sentence in sentences(unit.text):
            if NAMES.search(sentence) and not any(s in flat(sentence) for s in said.get(unit.key, [])):
                where = f"{unit.where}{' cell ' + unit.cell if unit.cell else ''}"
                wrong.append(f"{where}: {sentence[:160]!r}")
    return wrong


def transcript_lines(register: dict[str, Any], seeds: Path) -> dict[str, list[str]]:
    """Each talk's transcript, as lines, found by its file-name prefix and checked by its title."""
    out = {}
    for talk, spec in register["talks"].items():
        files = sorted(seeds.glob(f"{spec['file_prefix']}*.txt"))
        assert len(files) == 1, f"expected one transcript {spec['file_prefix']}*.txt in {seeds}, found {files}"
        text = files[0].read_text()
        assert flat(spec["title"]) in flat(text), (
            f"{files[0].name} is not the {talk} talk: its title {spec['title']!r} is not in it; fix 'talks' "
            "in the register")
        out[str(talk)] = text.splitlines()
    return out


def lost(register: dict[str, Any], transcripts: dict[str, list[str]]) -> list[str]:
    """Claims whose locator words are not within NEAR lines of their line; says where they are, if anywhere."""
    wrong = []
    for claim in register["claims"]:
        if str(claim.get("talk")) not in transcripts or not isinstance(claim.get("line"), int) or not claim.get("find"):
            wrong.append(f"{claim.get('where')} {claim.get('cell') or ''} {claim.get('says')!r}: no talk, line and "
                         "find to look for")
            continue
        lines = transcripts[str(claim["talk"])]
        line, words = claim["line"], flat(str(claim["find"]))
        window = flat(" ".join(lines[max(0, line - 1 - NEAR):line + NEAR]))
        if words in window:
            continue
        elsewhere = ([n for n in range(1, len(lines) + 1) if words in flat(lines[n - 1])]
                     or [n for n in range(1, len(lines) + 1) if words in flat(" ".join(lines[n - 1:n + 1]))])
        hint = (f"the words are at line {elsewhere[0]}" if elsewhere
                else "the words are nowhere in the transcript (copy a few words of the passage as the captions "
                     "spell them)")
        wrong.append(f"{claim['where']} {claim.get('cell') or ''} {claim['says']!r}: {claim['talk']} talk, line "
                     f"{line}, {claim['find']!r} not found within {NEAR} lines; {hint}")
    return wrong


# The tests.

@pytest.fixture(scope="module")
def register() -> dict[str, Any]:
    return load()


@pytest.fixture(scope="module")
def course() -> list[Unit]:
    return [u for p in scanned() for u in units(p)]


def test_every_claim_has_its_talk_and_a_locator(register: dict[str, Any]) -> None:
    wrong = incomplete(register)
    assert not wrong, f"{REGISTER.name}: incomplete entries:\n" + "\n".join(wrong)


def test_every_entry_is_where_it_says(register: dict[str, Any], course: list[Unit]) -> None:
    wrong = misplaced(register, course)
    assert not wrong, f"{REGISTER.name}: entries that point at nothing:\n" + "\n".join(wrong)


def test_every_sentence_that_names_a_talk_is_registered(register: dict[str, Any], course: list[Unit]) -> None:
    wrong = unregistered(register, course)
    assert not wrong, (
        f"sentences that name a talk but are not in {REGISTER.relative_to(ROOT)}: add each as a claim (with the "
        "talk, the transcript line and a few words that find the passage there) or, if it credits the talk "
        "with nothing, as a mention with the reason:\n" + "\n".join(wrong))


def test_every_locator_finds_its_passage(register: dict[str, Any]) -> None:
    if not sorted(SEEDS.glob("*.txt")):
        pytest.skip(f"the talks' transcripts are not in {SEEDS} (they are not shipped with the course; set "
                    "KRMCOURSE_SEEDS to their folder to check the register's locators)")
    wrong = lost(register, transcript_lines(register, SEEDS))
    assert not wrong, f"{REGISTER.name}: locators that do not find their passage:\n" + "\n".join(wrong)


def test_the_checks_read_the_course(register: dict[str, Any], course: list[Unit]) -> None:
    """Guard against checks that pass because they read nothing."""
    naming = [s for u in course for s in sentences(u.text) if NAMES.search(s)]
    assert len(naming) >= 60 and len(register["claims"]) >= 60, (len(naming), len(register["claims"]))
    assert {str(c["talk"]) for c in register["claims"]} == {"2019", "2023"}


# Each check, shown failing on a broken register: a small one written here, so that what each check
# reports does not depend on the state of the real one.

COURSE = [Unit("notebooks/98-demo.ipynb", "a1", "## Demo\n\nThe 2019 talk counted about 40 pairs. Ours has one."),
          Unit("notebooks/98-demo.ipynb", "a2", "The talk beside this cluster\n\nNo talk here."),
          Unit("krmcourse/demo.py", None, '"""Kinds, as the speaker counted them."""')]


def demo() -> dict[str, Any]:
    return {"talks": {2019: {"file_prefix": "000_", "title": "Growth and Design Patterns in the Extensions Ecosystem"}},
            "claims": [{"where": "notebooks/98-demo.ipynb", "cell": "a1", "says": "counted about 40 pairs",
                        "talk": 2019, "line": 193, "find": "around 40 of these"},
                       {"where": "krmcourse/demo.py", "says": "as the speaker counted them", "talk": 2019,
                        "line": 93, "find": "genus and species"}],
            "mentions": [{"where": "notebooks/98-demo.ipynb", "cell": "a2", "says": "The talk beside this cluster",
                          "why": "a heading"}]}


def test_the_demo_register_passes() -> None:
    assert (incomplete(demo()), misplaced(demo(), COURSE), unregistered(demo(), COURSE)) == ([], [], [])


def test_a_claim_without_a_locator_fails() -> None:
    broken = demo()
    del broken["claims"][0]["line"]
    broken["claims"][1]["find"] = ""
    broken["mentions"][0]["why"] = None
    wrong = incomplete(broken)
    assert len(wrong) == 3 and "has no line" in wrong[0] and "has no find" in wrong[1] and "has no why" in wrong[2]
    pasted = demo()
    pasted["claims"][0]["find"] = "a whole passage pasted from the transcript instead of a few of its words"
    pasted["claims"][1]["talk"] = 2021
    wrong = incomplete(pasted)
    assert len(wrong) == 2 and "not the passage itself" in wrong[0] and "credits talk 2021" in wrong[1], wrong


def test_a_sentence_that_names_a_talk_without_an_entry_fails() -> None:
    broken = demo()
    del broken["claims"][0]
    assert unregistered(broken, COURSE) == ["notebooks/98-demo.ipynb cell a1: 'The 2019 talk counted about 40 pairs.'"]
    extra = Unit("notebooks/98-demo.ipynb", "a3", "- As the 2023 talk said, and nobody registered.")
    assert unregistered(demo(), [*COURSE, extra]) == [
        "notebooks/98-demo.ipynb cell a3: '- As the 2023 talk said, and nobody registered.'"]
    # An entry of another cell does not cover the sentence, even with the same words.
    elsewhere = demo()
    elsewhere["claims"][0]["cell"] = "a2"
    assert len(unregistered(elsewhere, COURSE)) == 1


def test_an_entry_whose_words_moved_fails() -> None:
    broken = demo()
    broken["claims"][0]["says"] = "words this course never wrote"
    broken["mentions"][0]["cell"] = "no-such-cell"
    wrong = misplaced(broken, COURSE)
    assert len(wrong) == 2 and "no longer says" in wrong[0] and "no such file or cell" in wrong[1], wrong


def test_a_bad_locator_fails() -> None:
    if not sorted(SEEDS.glob("*.txt")):
        pytest.skip(f"the talks' transcripts are not in {SEEDS}")
    register = load()
    transcripts = transcript_lines(register, SEEDS)
    assert lost(demo(), transcripts) == []
    broken = demo()
    broken["claims"][0]["line"] = 213
    broken["claims"][1]["find"] = "words no caption ever had"
    broken["claims"].append({"where": "krmcourse/demo.py", "says": "no locator", "talk": 2019})
    wrong = lost(broken, transcripts)
    assert len(wrong) == 3, wrong
    assert "the words are at line 193" in wrong[0] and "nowhere in the transcript" in wrong[1], wrong
    assert "no talk, line and find" in wrong[2], wrong
