"""Find kind-pair patterns by name (concept E5): X/ClusterX, X/XClaim and X/XClass.

The detector is deliberately naive, the way a first pass over a crawl would be: it pairs kind names
only. Scope is reported beside each pair because the patterns predict it (ClusterX is cluster-scoped,
X namespaced; a class is cluster-scoped; a claim is namespaced), and the hand-labelled sample in
``datasets/labels/pair_sample.csv`` measures how often a name match is a real pattern.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

#: Pattern name -> how the partner's kind name is made from the base kind X.
PATTERNS: dict[str, Callable[[str], str]] = {
    "X/ClusterX": lambda x: f"Cluster{x}",
    "X/XClaim": lambda x: f"{x}Claim",
    "X/XClass": lambda x: f"{x}Class",
}
PAIR_COLUMNS = [
    "pattern", "base_group", "base_kind", "base_scope", "partner_group", "partner_kind", "partner_scope",
    "same_group", "scope_fits",
]


def _scope_fits(pattern: str, base_scope: str, partner_scope: str) -> bool:
    if pattern == "X/ClusterX":
        return base_scope == "Namespaced" and partner_scope == "Cluster"
    if pattern == "X/XClaim":
        return partner_scope == "Namespaced"
    return partner_scope == "Cluster"


def detect_pairs(kinds: pd.DataFrame, cross_group: bool = True) -> pd.DataFrame:
    """All (X, partner) name matches among the kinds in ``kinds`` (columns group, kind, scope).

    With ``cross_group`` the partner may live in another API group; ``same_group`` tells which is which.

    >>> df = pd.DataFrame({"group": ["cert-manager.io"] * 2, "kind": ["Issuer", "ClusterIssuer"],
    ...                    "scope": ["Namespaced", "Cluster"]})
    >>> detect_pairs(df)[["pattern", "base_kind", "partner_kind", "scope_fits"]].values.tolist()
    [['X/ClusterX', 'Issuer', 'ClusterIssuer', True]]
    """
    missing = {"group", "kind", "scope"} - set(kinds.columns)
    if missing:
        raise ValueError(f"detect_pairs needs columns group, kind and scope; missing: {sorted(missing)}")
    unique = kinds[["group", "kind", "scope"]].drop_duplicates(["group", "kind"])
    by_kind: dict[str, list[tuple[str, str]]] = {}
    for group, kind, scope in unique.itertuples(index=False):
        by_kind.setdefault(kind, []).append((group, scope))
    rows = []
    for base_kind in sorted(by_kind):
        for pattern, make in PATTERNS.items():
            partner_kind = make(base_kind)
            for base_group, base_scope in by_kind[base_kind]:
                for partner_group, partner_scope in by_kind.get(partner_kind, []):
                    same = base_group == partner_group
                    if not same and not cross_group:
                        continue
                    rows.append({
                        "pattern": pattern,
                        "base_group": base_group, "base_kind": base_kind, "base_scope": base_scope,
                        "partner_group": partner_group, "partner_kind": partner_kind,
                        "partner_scope": partner_scope,
                        "same_group": same,
                        "scope_fits": _scope_fits(pattern, base_scope, partner_scope),
                    })
    return pd.DataFrame(rows, columns=PAIR_COLUMNS)


def pair_key(df: pd.DataFrame) -> pd.Series:
    """A stable text key per detected pair, used to join detections with hand labels."""
    return (df["pattern"] + " " + df["base_group"] + "/" + df["base_kind"] + " -> "
            + df["partner_group"] + "/" + df["partner_kind"])


def precision(detected: pd.DataFrame, labels: pd.DataFrame) -> pd.DataFrame:
    """Precision of the detector per (pattern, same_group), on the detections that carry a hand label.

    ``labels`` has columns key, is_pattern ("yes"/"no") and reason. Detections without a label are not
    counted, and a label whose key the detector no longer produces is an error, so the sample and the
    detector cannot drift apart silently.
    """
    keyed = detected.assign(key=pair_key(detected))
    stale = sorted(set(labels["key"]) - set(keyed["key"]))
    if stale:
        raise ValueError(f"hand labels for pairs the detector does not find: {stale[:5]}")
    joined = keyed.merge(labels[["key", "is_pattern"]], on="key")
    joined = joined.assign(correct=joined["is_pattern"].eq("yes"))
    table = joined.groupby(["pattern", "same_group"]).agg(
        labelled=("correct", "size"), true_pairs=("correct", "sum"))
    table["precision"] = (table["true_pairs"] / table["labelled"]).round(2)
    total = pd.DataFrame(
        {"labelled": [len(joined)], "true_pairs": [int(joined["correct"].sum())]},
        index=pd.MultiIndex.from_tuples([("all", "all")], names=["pattern", "same_group"]))
    total["precision"] = (total["true_pairs"] / total["labelled"]).round(2)
    return pd.concat([table, total])
