"""Exercise: create the first object of a kind that no client has seen, from Python, with a dynamic client.

``krm_reflect.new_kind`` defines a CRD whose group, version, kind and plural are drawn at random for this
lab, and names only the group. The learner finds the rest through discovery (``/apis/<group>``, kubectl
api-resources, or kr8s) and creates an object called ``first`` in ``model`` from code. The plural is never
the kind with an "s", so a client that guesses the URL instead of reading discovery asks for a resource
the server does not have. The object's managedFields tell kubectl's writes from a program's.
"""

from __future__ import annotations

from collections.abc import Callable

from krmcourse import CheckFailed, Lab

KUBECTL_CREATORS = {("kubectl-create", "Update"), ("kubectl-client-side-apply", "Update"), ("kubectl", "Apply")}


def check(lab: Lab) -> None:
    ref = lab.support("krm_reflect")
    drawn = ref.drawn_kind(lab)
    if drawn is None or lab.get("crd", drawn.resource) is None:
        raise CheckFailed("The new API group is not there yet: run the notebook's cell that calls "
                          "krm_reflect.new_kind(lab).")
    made = lab.get(drawn.resource, ref.FIRST, ref.NAMESPACE, show_managed_fields=True)
    if made is None:
        others = [o["kind"] for o in lab.objects("plants.garden.krmcourse.dev", ref.NAMESPACE)
                  if o["metadata"]["name"] == ref.FIRST]
        also = f" (there is a {others[0]} called {ref.FIRST}, but that kind was known before)" if others else ""
        raise CheckFailed(
            f"There is no object of the new group's kind called {ref.FIRST} in {ref.NAMESPACE} yet{also}. "
            "If a create was answered 404 Not Found, the URL named a resource the server does not serve: "
            f"discovery (/apis/{drawn.group}) lists the group's versions, and each version its resources, "
            "with their kinds and plural names.")
    writes = made["metadata"].get("managedFields") or []
    if not writes:
        raise CheckFailed(f"{ref.FIRST} records no writer in its managedFields, so nothing tells how it was made: "
                          "delete it and create it again from code, with its spec.note set.")
    by_kubectl = sorted(w["manager"] for w in writes if (w.get("manager"), w.get("operation")) in KUBECTL_CREATORS)
    if by_kubectl:
        raise CheckFailed(
            f"{ref.FIRST} was created with kubectl (its managedFields name {', '.join(by_kubectl)}). kubectl "
            "can, but this exercise wants it created from Python, by a client that learned the kind at run "
            f"time: delete {ref.FIRST} and create it again from code.")


def solve(lab: Lab) -> None:
    from kr8s.objects import new_class

    ref = lab.support("krm_reflect")
    wire = lab.support("krm_wire")
    group = ref.new_kind(lab).group
    with wire.RawClient(lab.kubeconfig) as raw:  # discovery: the group's preferred version, then its resources
        version = raw.get(f"/apis/{group}").body["preferredVersion"]["groupVersion"]
        found = [r for r in raw.get(f"/apis/{version}").body["resources"] if "/" not in r["name"]][0]
    made = lab.get(f"{found['name']}.{group}", ref.FIRST, ref.NAMESPACE, show_managed_fields=True)
    if made and any(w.get("manager", "").startswith("kubectl") for w in made["metadata"].get("managedFields", [])):
        lab.delete(f"{found['name']}.{group}", ref.FIRST, ref.NAMESPACE)
        made = None
    if made is None:
        cls = new_class(found["kind"], version=version, namespaced=found["namespaced"], plural=found["name"],
                        asyncio=False)
        cls({"metadata": {"name": ref.FIRST, "namespace": ref.NAMESPACE}, "spec": {"note": "found it"}},
            api=lab.api).create()


def _copy_the_plant_cell(lab: Lab) -> None:
    """The kr8s cell above, as it stands, with the name changed: a Plant, the kind everyone knew."""
    from kr8s.objects import new_class

    ref = lab.support("krm_reflect")
    ref.new_kind(lab)  # the notebook's cell that names the new group has run
    plant = new_class("Plant", version="garden.krmcourse.dev/v1", namespaced=True, plural="plants", asyncio=False)
    plant({"metadata": {"name": ref.FIRST, "namespace": ref.NAMESPACE}, "spec": {"species": "Thymus vulgaris"}},
          api=lab.api).create()


def _guess_the_plural(lab: Lab) -> None:
    """The kind and version read off discovery, but no plural given: kr8s makes one by adding an "s"."""
    from kr8s import NotFoundError, ServerError
    from kr8s.objects import new_class

    ref = lab.support("krm_reflect")
    drawn = ref.drawn_kind(lab) or ref.new_kind(lab)
    guessed = new_class(drawn.kind, version=f"{drawn.group}/{drawn.version}", namespaced=True, asyncio=False)
    try:
        guessed({"metadata": {"name": ref.FIRST, "namespace": ref.NAMESPACE}, "spec": {"note": "a guess"}},
                api=lab.api).create()
    except (ServerError, NotFoundError):  # 404: the server has no such resource
        pass


def _with_kubectl(lab: Lab) -> None:
    """The kind found, then the object made with kubectl create instead of from code."""
    import json

    ref = lab.support("krm_reflect")
    drawn = ref.drawn_kind(lab) or ref.new_kind(lab)
    lab.kubectl("create", "-f", "-", input=json.dumps({
        "apiVersion": f"{drawn.group}/{drawn.version}", "kind": drawn.kind,
        "metadata": {"name": ref.FIRST, "namespace": ref.NAMESPACE}, "spec": {"note": "made by kubectl"}}))


#: What a hurried learner might try instead: each must leave the check failing, with a hint.
WRONG: dict[str, Callable[[Lab], None]] = {
    "the Plant cell above, with the name changed": _copy_the_plant_cell,
    "the new kind with a guessed plural (kind + s)": _guess_the_plural,
    "the new kind created with kubectl": _with_kubectl,
}
