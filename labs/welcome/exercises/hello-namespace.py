"""Exercise: create a Namespace called ``hello``, the learner's first object in a lab cluster.

The check reads the Namespace back from the API server and also wants it Active, so a namespace
that is being deleted (after a learner tried ``kubectl delete``) does not count. When there is no
such Namespace, it looks for the two near misses of a first session: an object of another kind
called ``hello``, and a Namespace whose name only starts with it.
"""

from __future__ import annotations

from collections.abc import Callable

from krmcourse import CheckFailed, Lab

NAME = "hello"


def _near_misses(lab: Lab) -> str:
    """What the cluster holds that looks like the answer but is not, said in one sentence (or "")."""
    namespaces = lab.objects("namespaces")
    close = sorted(ns["metadata"]["name"] for ns in namespaces if NAME in ns["metadata"]["name"])
    if close:
        which = f"is a Namespace {close[0]}" if len(close) == 1 else f"are Namespaces {', '.join(close)}"
        return f" There {which}, but the name has to be exactly {NAME!r}."
    others = lab.objects("configmaps,secrets,serviceaccounts", all_namespaces=True,
                         field_selector=f"metadata.name={NAME}")
    if others:
        found = ", ".join(f"a {o['kind']} in {o['metadata']['namespace']}" for o in others)
        return f" There is an object called {NAME!r} ({found}), but it is not a Namespace."
    return ""


def check(lab: Lab) -> None:
    namespace = lab.get("namespace", NAME)
    if namespace is None:
        raise CheckFailed(f"The cluster has no Namespace called {NAME!r} yet.{_near_misses(lab)}")
    phase = (namespace.get("status") or {}).get("phase")
    if phase != "Active":
        raise CheckFailed(
            f"The Namespace {NAME!r} exists but its phase is {phase!r}, not Active: "
            "it is being deleted. Wait until it is gone, then try again."
        )


def solve(lab: Lab) -> None:
    lab.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAME}})
    lab.wait_until(
        lambda: (lab.get("namespace", NAME) or {}).get("status", {}).get("phase") == "Active",
        timeout=30,
        message=f"Namespace {NAME} did not become Active",
    )


def _create_a_configmap_called_hello(lab: Lab) -> None:
    """Create an object with the right name but the wrong kind: a ConfigMap in the default namespace."""
    lab.kubectl("create", "configmap", NAME, "-n", "default", "--from-literal=greeting=hi")


def _create_a_namespace_with_a_longer_name(lab: Lab) -> None:
    """Create a Namespace, but call it what a tutorial would: hello-world."""
    lab.kubectl("create", "namespace", f"{NAME}-world")


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "a ConfigMap called hello instead of a Namespace": _create_a_configmap_called_hello,
    "a Namespace called hello-world": _create_a_namespace_with_a_longer_name,
}
