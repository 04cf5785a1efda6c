"""Exercise watch-forecast: forecast the watches a fleet of controller processes will open, then count them (G2).

``neighbours.open_fleet`` draws three processes of the Widget controller, each with its own switches: which
loops it runs, whether it polls widgets instead of watching them, whether it also watches the ConfigMaps it
owns. The learner forecasts, in the ConfigMap ``citizens/watch-forecast``, how many watches the fleet will
hold open on widgets and on configmaps. Loops in one process share its cache, so they share its watches;
a polling cache holds none; and a ConfigMap loop without a watch on its children reads them with GETs.
The draw is made so that neither "one per process" nor "one per loop" gives the right numbers.

The check grades the forecast against the draw, kept beside the cluster, so it answers at once; the
notebook then starts the fleet and counts the watches on kube-apiserver, which is where the forecast is
proved (``neighbours.observe_fleet``).
"""

from __future__ import annotations

from collections.abc import Callable

from krmcourse import CheckFailed, Lab

OPEN = "Run the cell that draws it (fleet = nb.open_fleet(lab))."


def check(lab: Lab) -> None:
    nb = lab.support("neighbours")
    found = nb.fleet(lab)
    if found is None:
        raise CheckFailed("No fleet has been drawn for this cluster yet. " + OPEN)
    said = nb.read_forecast(lab)
    if said is None:
        raise CheckFailed(f"There is no forecast yet: the ConfigMap {nb.FORECAST} in {nb.NS} needs two keys, "
                          "'widgets' and 'configmaps', each the number of watches the fleet will hold open on "
                          "that resource.")
    try:
        numbers = {r: int(said[r]) for r in ("widgets", "configmaps")}
    except (KeyError, ValueError):
        raise CheckFailed(f"Your forecast says {said}: it needs the keys 'widgets' and 'configmaps', each a whole "
                          "number of watches.") from None
    want = found.watches()
    wrong = [r for r in ("widgets", "configmaps") if numbers[r] != want[r]]
    if wrong:
        advice = {
            "widgets": "For widgets, ask of each process how its cache learns about them, and whether its "
                       "loops have a cache each.",
            "configmaps": "For configmaps, ask of each process how its ConfigMap loop reads the ConfigMaps it "
                          "owns, when it reads them at all.",
        }
        raise CheckFailed(f"Your forecast for {wrong[0]}, {numbers[wrong[0]]}, is not what the fleet will hold open. "
                          + advice[wrong[0]] + " Each switch is described at the top of widgetctl.py.")


def solve(lab: Lab) -> None:
    nb = lab.support("neighbours")
    fleet = nb.open_fleet(lab)
    widgets = configmaps = 0
    for process in fleet.processes:
        if not process["poll"]:  # one informer on widgets per process, whichever loops read from it
            widgets += 1
        if process["watch_children"]:  # a second informer, on the ConfigMaps it owns
            configmaps += 1
    nb.forecast(lab, widgets=widgets, configmaps=configmaps)


# --------------------------------------------------------------------------- what a hurried learner tries
def _one_per_loop(lab: Lab) -> None:
    """Every loop its own watch, as if loops in one process had a cache each."""
    nb = lab.support("neighbours")
    fleet = nb.open_fleet(lab)
    nb.forecast(lab, widgets=sum(len(p["loops"]) for p in fleet.processes if not p["poll"]),
                configmaps=sum(bool(p["watch_children"]) for p in fleet.processes))


def _one_per_process(lab: Lab) -> None:
    """A watch on widgets for every process, the polling one too."""
    nb = lab.support("neighbours")
    fleet = nb.open_fleet(lab)
    nb.forecast(lab, widgets=len(fleet.processes),
                configmaps=sum(bool(p["watch_children"]) for p in fleet.processes))


def _every_configmap_loop_watches(lab: Lab) -> None:
    """A watch on configmaps for every process with a ConfigMap loop, with or without --watch-children."""
    nb = lab.support("neighbours")
    fleet = nb.open_fleet(lab)
    nb.forecast(lab, widgets=sum(not p["poll"] for p in fleet.processes),
                configmaps=sum("configmap" in p["loops"] for p in fleet.processes))


def _the_table_above(lab: Lab) -> None:
    """The shared-cache table's figures: one watch on widgets, none on configmaps."""
    nb = lab.support("neighbours")
    nb.open_fleet(lab)
    nb.forecast(lab, widgets=1, configmaps=0)


WRONG: dict[str, Callable[[Lab], None]] = {
    "one watch per loop": _one_per_loop,
    "one watch on widgets per process, polling included": _one_per_process,
    "a watch on configmaps for every ConfigMap loop": _every_configmap_loop_watches,
    "the figures of the shared-cache table above": _the_table_above,
}
