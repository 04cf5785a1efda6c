"""Notebook helpers for the twins lab: check what an identity may do, and find twin pairs in discovery."""

from __future__ import annotations

from krmcourse import Lab


def can_i(lab: Lab, serviceaccount: str, namespace: str, verb: str, resource: str, where: str | None) -> bool:
    """Ask the API server (a SubjectAccessReview, through lab.can_i) what an identity may do."""
    return lab.can_i(f"{namespace}/{serviceaccount}", verb, resource, where)


def twin_pairs(lab: Lab) -> list[tuple[str, str, str]]:
    """Find X / ClusterX pairs that this cluster serves, from live discovery.

    A pair is a namespaced kind X and a cluster-scoped kind ClusterX in the same API group.
    Returns (group, X, ClusterX) tuples, sorted.
    """
    table = lab.kubectl("api-resources", "--no-headers", "-o", "wide")
    kinds: dict[tuple[str, str], bool] = {}
    for line in table.splitlines():
        # Columns: NAME [SHORTNAMES] APIVERSION NAMESPACED KIND VERBS [CATEGORIES]
        cols = line.split()
        flag = next(i for i, c in enumerate(cols) if c in ("true", "false"))
        group = cols[flag - 1].rpartition("/")[0] or "core"
        kinds[(group, cols[flag + 1])] = cols[flag] == "true"
    pairs = []
    for (group, kind), namespaced in kinds.items():
        twin = (group, "Cluster" + kind)
        if namespaced and kinds.get(twin) is False:
            pairs.append((group, kind, twin[1]))
    return sorted(pairs)


# --------------------------------------------------------------------------- exercise team-policy: drawn per cluster
RELEASE = "twins.krmcourse.dev/release"  # on App team-a/tools, once new_tools_release has run
_ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"  # no 0/o, 1/l/i: names are read off a screen


def new_tools_release(lab: Lab) -> None:
    """Once per cluster, team-a ships a new release of App tools: an image and a policyRef name drawn here, so
    that only the App itself (and the controller's verdict on it) says what its policy must be called and allow."""
    import json
    import secrets

    app = lab.get("apps.twins.krmcourse.dev", "tools", namespace="team-a")
    if app is None or RELEASE in (app["metadata"].get("annotations") or {}):
        return
    rng = secrets.SystemRandom()
    token = "".join(rng.choice(_ALPHABET) for _ in range(4))
    tool = rng.choice(["builder", "linter", "scanner", "packer"])
    spec = {"image": f"teams.example.com/team-a/{tool}-{token}:{rng.randint(1, 9)}.{rng.randint(0, 20)}",
            "policyRef": {"name": f"team-a-{rng.choice(['images', 'sources', 'builds'])}-{token}"}}
    lab.kubectl("patch", "apps.twins.krmcourse.dev", "tools", "-n", "team-a", "--type=merge",
                "-p", json.dumps({"metadata": {"annotations": {RELEASE: token}}, "spec": spec}))
