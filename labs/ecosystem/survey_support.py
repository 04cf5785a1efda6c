"""The ecosystem lab's dataset questions: each lab cluster draws its own, and keeps the learner's answers.

A question's parameters (which releases, which pattern, which CRDs are in the crawl) are drawn from the uid
of the ConfigMap ``survey/draw``, which the lab's manifests create: every new lab cluster has another uid,
so another draw, while a snapshot or a notebook restarted against the same cluster keeps it. The answers go
into the ConfigMap ``survey/answers``, one key per question. Every expected answer is computed here from
the committed dataset (``datasets/``) at check time; none is written down.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from krmcourse import CheckFailed, Lab
from krmcourse import ecosystem as eco

NAMESPACE = "survey"
DRAW = "draw"
ANSWERS = "answers"
#: The keys of survey/answers, one per exercise.
SPECIES, NEW_KINDS, PAIR_GROUPS = "species", "new-kinds", "pair-groups"


# --------------------------------------------------------------------------- the draw and the answers
def _uid(lab: Lab) -> str:
    cm = lab.get("configmap", DRAW, namespace=NAMESPACE)
    if cm is None:
        raise CheckFailed(f"The ConfigMap {DRAW} in the {NAMESPACE} namespace is gone, and this lab's questions "
                          "are drawn from it. `krmcourse reset ecosystem` brings it back, with new questions.")
    return str(cm["metadata"]["uid"])


def _rng(seed: str, topic: str) -> random.Random:
    return random.Random(f"{seed}/{topic}")


def answer(lab: Lab, key: str, value: object) -> None:
    """Write one answer into the ConfigMap survey/answers (made on first use), leaving the others."""
    if lab.get("configmap", ANSWERS, namespace=NAMESPACE) is None:
        lab.kubectl("create", "configmap", ANSWERS, "-n", NAMESPACE, f"--from-literal={key}={value}")
    else:
        lab.kubectl("patch", "configmap", ANSWERS, "-n", NAMESPACE, "--type=merge",
                    "-p", json.dumps({"data": {key: str(value)}}))


def given(lab: Lab, key: str) -> int:
    """The learner's answer under ``key`` as a whole number; CheckFailed says what is missing."""
    data = (lab.get("configmap", ANSWERS, namespace=NAMESPACE) or {}).get("data") or {}
    raw = str(data.get(key, "")).strip()
    if not raw:
        raise CheckFailed(f"No answer yet: the check reads the key {key!r} of the ConfigMap {ANSWERS} in the "
                          f"{NAMESPACE} namespace (survey.answer(lab, {key!r}, ...) writes it).")
    try:
        number = float(raw)
    except ValueError:
        number = 0.5
    if not number.is_integer():
        raise CheckFailed(f"The answer under {key!r} is {raw!r}; the question asks for a count, a whole number.")
    return int(number)


def judge(lab: Lab, key: str, right: int, near_misses: dict[str, int], advice: str) -> None:
    """Pass when the answer is ``right``; otherwise name the near miss it matches, if any, or give ``advice``."""
    got = given(lab, key)
    if got == right:
        return
    hints = [hint for hint, value in near_misses.items() if got == value]
    raise CheckFailed(f"{got} is not the answer. " + (" Or: ".join(hints) if hints else advice))


# --------------------------------------------------------------------------- E1: split, deduplicate, name
#: Objects that sit beside CRDs in the files of an operator's repository: not API types.
_NEIGHBOURS: tuple[dict[str, Any], ...] = (
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "operator-system"}},
    {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "operator", "namespace": "operator-system"}},
    {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "operator", "namespace": "operator-system"},
     "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "operator"}},
              "template": {"metadata": {"labels": {"app": "operator"}},
                           "spec": {"containers": [{"name": "manager", "image": "example.org/operator:1.0"}]}}}},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "operator"},
     "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list", "watch"]}]},
)
FILES = ("operator-a/crds.yaml", "operator-a/deploy.yaml", "charts/b/templates/crds.yaml", "vendored/c/all.yaml")


def _crd(group: str, kind: str, scope: str, versions: list[str]) -> dict[str, Any]:
    plural = kind.lower() + "s"
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {"group": group, "scope": scope, "names": {"kind": kind, "plural": plural},
                     "versions": [{"name": v, "served": True, "storage": i == 0,
                                   "schema": {"openAPIV3Schema": {"type": "object",
                                                                  "x-kubernetes-preserve-unknown-fields": True}}}
                                  for i, v in enumerate(versions)]}}


def crawl_documents(lab: Lab) -> dict[str, list[dict[str, Any] | None]]:
    """This lab's crawl: file name -> its YAML documents (None for an empty one), drawn from the dataset."""
    return draw_crawl(_uid(lab))


def draw_crawl(seed: str) -> dict[str, list[dict[str, Any] | None]]:
    """The crawl that ``seed`` draws: file name -> its YAML documents (None for an empty one).

    About a dozen CRD species of the schema dump, with their real groups, kinds and versions: two kinds of the
    same name in different groups, a few served at several versions, some copied into a second file (one of
    those copies older, with fewer versions), beside objects that are no API type, and empty documents.
    """
    rng = _rng(seed, "crawl")
    kinds = eco.load_kinds()
    rows = kinds[(kinds["source"] == "openshift-dump") & kinds["served_by"].isin(["crd", "crd-like"])
                 & ~kinds["group"].isin(eco.aggregated_groups())]
    versions = (rows.sort_values("version", key=lambda s: s.map(eco.version_rank), ascending=False)
                .groupby(["group", "kind", "scope"])["version"].agg(list))
    species = sorted(versions.index)
    by_name: dict[str, list[tuple[str, str, str]]] = {}
    for item in species:
        by_name.setdefault(item[1], []).append(item)
    shared = sorted(name for name, items in by_name.items() if len(items) > 1)
    several = [s for s in species if len(versions[s]) > 1]
    chosen = rng.sample(by_name[rng.choice(shared)], 2) + rng.sample(several, 3)
    rest = [s for s in species if s not in chosen]
    chosen += rng.sample(rest, rng.randint(6, 9))
    rng.shuffle(chosen)
    crds = [_crd(g, k, scope, list(versions[(g, k, scope)])) for g, k, scope in chosen]
    files: dict[str, list[dict[str, Any] | None]] = {name: [] for name in FILES}
    for i, doc in enumerate(crds):
        files[FILES[i % len(FILES)]].append(doc)
    copies = rng.sample(range(len(crds)), 3)
    for n, i in enumerate(copies):
        copy = json.loads(json.dumps(crds[i]))
        if n == 0 and len(copy["spec"]["versions"]) > 1:
            copy["spec"]["versions"] = [{**copy["spec"]["versions"][-1], "storage": True}]  # an older copy
        files[FILES[(i + 1 + n) % len(FILES)]].append(copy)
    for name in FILES:
        files[name] += [json.loads(json.dumps(d)) for d in rng.sample(_NEIGHBOURS, rng.randint(1, 2))]
        rng.shuffle(files[name])
        if rng.random() < 0.5:
            files[name].insert(rng.randrange(len(files[name]) + 1), None)
    return files


def crawl(lab: Lab) -> Path:
    """Write this lab's crawl under the lab's home folder (again, when the draw has changed); its folder."""
    return write_crawl(_uid(lab), lab.home / "crawl")


def write_crawl(seed: str, folder: Path) -> Path:
    """Write the crawl ``seed`` draws into ``folder``, unless it holds that draw already."""
    stamp = folder / ".draw"
    if stamp.exists() and stamp.read_text() == seed:
        return folder
    for name, docs in draw_crawl(seed).items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        text = "".join("---\n# (empty)\n" if d is None else "---\n" + yaml.safe_dump(d, sort_keys=False)
                       for d in docs)
        path.write_text(text)
    stamp.write_text(seed)
    return folder


@dataclass(frozen=True)
class CrawlCounts:
    """What each reading of the crawl counts: only ``species`` is the talk's unit."""

    files: int
    documents: int
    crd_documents: int
    versioned_rows: int
    kind_names: int
    species: int


def crawl_counts(lab: Lab) -> CrawlCounts:
    return count_crawl(crawl_documents(lab))


def count_crawl(files: dict[str, list[dict[str, Any] | None]]) -> CrawlCounts:
    docs = [d for ds in files.values() for d in ds if d is not None]
    crds = [d for d in docs if d["kind"] == "CustomResourceDefinition"]
    rows = pd.DataFrame([{"group": d["spec"]["group"], "kind": d["spec"]["names"]["kind"], "version": v["name"]}
                         for d in crds for v in d["spec"]["versions"]])
    return CrawlCounts(files=len(files), documents=len(docs), crd_documents=len(crds),
                       versioned_rows=len(rows.drop_duplicates()), kind_names=rows["kind"].nunique(),
                       species=len(rows.drop_duplicates(["group", "kind"])))


# --------------------------------------------------------------------------- E2: growth across releases
def _kind_sets(builtin: pd.DataFrame) -> tuple[list[str], Callable[[str, bool], set[tuple[str, ...]]]]:
    order = sorted(builtin["k8s_version"].unique(), key=lambda v: tuple(int(p) for p in v[1:].split(".")))

    def served(version: str, with_versions: bool = False) -> set[tuple[str, ...]]:
        here = builtin[builtin["k8s_version"] == version]
        cols = ["group", "version", "kind"] if with_versions else ["group", "kind"]
        return set(here[cols].itertuples(index=False, name=None))
    return order, served


@dataclass(frozen=True)
class GrowthQuestion:
    since: str
    until: str
    # The numbers stay out of the repr, so that showing the question does not show its answer.
    new_kinds: int = field(repr=False)     # kinds (group, kind) served in `until` that `since` did not: the answer
    net_growth: int = field(repr=False)    # kinds in `until` minus kinds in `since`
    summed_added: int = field(repr=False)  # the growth table's `added`, summed after `since` up to `until`
    new_versions: int = field(repr=False)  # (group, version, kind) served in `until` and not in `since`


def growth_questions(builtin: pd.DataFrame | None = None) -> list[GrowthQuestion]:
    """Every pair of releases at least three apart where the four readings give four different numbers."""
    builtin = eco.load_builtin() if builtin is None else builtin
    order, served = _kind_sets(builtin)
    growth = eco.builtin_growth(builtin).set_index("k8s_version")
    out = []
    for i, j in combinations(range(len(order)), 2):
        if j - i < 3:
            continue
        a, b = order[i], order[j]
        q = GrowthQuestion(a, b, len(served(b, False) - served(a, False)),
                           len(served(b, False)) - len(served(a, False)),
                           int(growth.loc[order[i + 1:j + 1], "added"].sum()),
                           len(served(b, True) - served(a, True)))
        if len({q.new_kinds, q.net_growth, q.summed_added, q.new_versions}) == 4:
            out.append(q)
    return out


def growth_question(lab: Lab) -> GrowthQuestion:
    """This lab's two releases (their numbers are kept out of what it prints)."""
    return _rng(_uid(lab), "growth").choice(growth_questions())


# --------------------------------------------------------------------------- E5: kind pairs among CRDs
@dataclass(frozen=True)
class PairQuestion:
    pattern: str
    groups: int = field(repr=False)       # CRD API groups with at least one same-group pair of it: the answer
    pairs: int = field(repr=False)        # same-group pairs of the pattern among the CRDs
    dump_groups: int = field(repr=False)  # the same count over the whole dump (built-in and aggregated kinds too)


def pair_questions(kinds: pd.DataFrame | None = None) -> list[PairQuestion]:
    """One question per pattern where counting pairs, or counting over the whole dump, gives another number."""
    kinds = eco.load_kinds() if kinds is None else kinds
    crds = eco.crd_species(kinds)
    every = eco.species(kinds)
    dump = every[every["source"] == "openshift-dump"]

    def same_group(frame: pd.DataFrame, pattern: str) -> pd.DataFrame:
        pairs = eco.detect_pairs(frame)
        return pairs[(pairs["pattern"] == pattern) & pairs["same_group"]]
    out = []
    for pattern in eco.PATTERNS:
        found = same_group(crds, pattern)
        q = PairQuestion(pattern, found["base_group"].nunique(), len(found),
                         same_group(dump, pattern)["base_group"].nunique())
        if q.groups not in (q.pairs, q.dump_groups):
            out.append(q)
    return out


def pair_question(lab: Lab) -> PairQuestion:
    """This lab's pattern (its numbers are kept out of what it prints)."""
    return _rng(_uid(lab), "pairs").choice(pair_questions())
