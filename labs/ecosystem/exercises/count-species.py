"""Exercise count-species (E1): count the species that this lab's crawl of YAML files defines.

The crawl (``survey.crawl(lab)``, files under the lab's home folder) is drawn per lab cluster from the
schema dump: CRDs with their real groups, kinds and versions, some copied into a second file (one copy
older, with fewer versions), two kinds of the same name in different groups, beside objects that are no
API type and empty documents. The learner splits the files into documents, keeps the CRDs, deduplicates
and counts (API group, kind) pairs, and writes the count under ``species`` in ConfigMap survey/answers.
The check draws the same crawl from the dataset and counts it itself; each other way of counting (files,
documents, CRD documents, versions, kind names) gives another number, and the check says which one it is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd
import yaml

from krmcourse import Lab

ADVICE = ("A species is one (API group, kind) pair, however many files, copies or versions carry it: the "
          "group is under spec.group of each CustomResourceDefinition document, the kind under spec.names.kind.")


def check(lab: Lab) -> None:
    survey = lab.support("survey_support")
    counts = survey.crawl_counts(lab)
    survey.judge(lab, survey.SPECIES, counts.species, {
        "That is the number of files; each holds several documents, separated by '---'.": counts.files,
        "That counts every document, but only CustomResourceDefinitions define API types.": counts.documents,
        "That counts CRD documents, and some CRDs were copied into a second file.": counts.crd_documents,
        "That counts versions too: a kind served as v1beta1 and v1 is one species.": counts.versioned_rows,
        "That counts kind names: two groups can each define a kind of the same name.": counts.kind_names,
    }, ADVICE)


def _crawl_docs(lab: Lab) -> list[tuple[str, dict[str, Any] | None]]:
    """Every document of the crawl's files, read as a learner reads them: (file, document or None)."""
    survey = lab.support("survey_support")
    return [(str(path), doc) for path in sorted(survey.crawl(lab).rglob("*.yaml"))
            for doc in yaml.safe_load_all(path.read_text())]


def _crd_rows(lab: Lab) -> pd.DataFrame:
    return pd.DataFrame([{"group": d["spec"]["group"], "kind": d["spec"]["names"]["kind"], "version": v["name"]}
                         for _, d in _crawl_docs(lab) if d and d.get("kind") == "CustomResourceDefinition"
                         for v in d["spec"]["versions"]])


def solve(lab: Lab) -> None:
    survey = lab.support("survey_support")
    rows = []
    for path in sorted(survey.crawl(lab).rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):  # one file holds many documents; some are empty
            if doc and doc.get("kind") == "CustomResourceDefinition":  # only CRDs define API types
                rows.append({"group": doc["spec"]["group"], "kind": doc["spec"]["names"]["kind"]})
    species = pd.DataFrame(rows).drop_duplicates()  # copies and versions of one (group, kind) are one species
    survey.answer(lab, survey.SPECIES, len(species))


def _answer(count: Callable[[Lab], int]) -> Callable[[Lab], None]:
    def attempt(lab: Lab) -> None:
        survey = lab.support("survey_support")
        survey.answer(lab, survey.SPECIES, count(lab))
    return attempt


def _grep_kind_lines(lab: Lab) -> int:
    """The lines 'kind: CustomResourceDefinition' in the files, without reading the documents."""
    survey = lab.support("survey_support")
    return sum(path.read_text().count("kind: CustomResourceDefinition") for path in survey.crawl(lab).rglob("*.yaml"))


#: What a hurried learner might do instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "count the files": _answer(lambda lab: len({f for f, _ in _crawl_docs(lab)})),
    "count every document": _answer(lambda lab: sum(d is not None for _, d in _crawl_docs(lab))),
    "count CRD documents without removing copies": _answer(
        lambda lab: sum(bool(d) and d["kind"] == "CustomResourceDefinition" for _, d in _crawl_docs(lab))),
    "count (group, version, kind) rows": _answer(lambda lab: len(_crd_rows(lab).drop_duplicates())),
    "count kind names, ignoring the group": _answer(lambda lab: _crd_rows(lab)["kind"].nunique()),
    "grep for 'kind: CustomResourceDefinition'": _answer(_grep_kind_lines),
}
