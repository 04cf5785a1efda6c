"""Small notebooks the browser tests write into a temporary folder and run through JupyterLab.

The widget notebook changes a real lab cluster while its cell is still running, and waits for the
browser test to have *seen* each change before it makes the next: the test writes a file into
``acks/`` when the widget on the page shows a step. So every update is proven to arrive, and to be
drawn, while the cell runs; nothing waits for a fixed time.
"""

from __future__ import annotations

from pathlib import Path

import nbformat

#: A lab of its own for the widgets: the sandbox, in an instance no other test uses.
WIDGET_LAB = ("sandbox", "browser")
NAMESPACE = "widgets"
#: Cell indices in the widget notebook.
SETUP, TREE, TIMELINE = 0, 1, 2
#: What the ownership tree shows at each step, and the ack the cell waits for after it.
TREE_STEPS = ("tree-root", "tree-leaf-added", "tree-leaf-removed")
TIMELINE_STEPS = ("timeline-first", "timeline-second")

_SETUP = '''\
from pathlib import Path

from krmcourse import Lab
from krmcourse.widgets import EventTimeline, OwnershipTree

lab = Lab({lab!r}, instance={instance!r}).up()
NS = {namespace!r}
ACKS = Path({acks!r})
lab.kubectl("create", "namespace", NS)


def configmap(name: str, owner: dict | None = None) -> dict:
    meta = {{"name": name, "namespace": NS}}
    if owner is not None:
        meta["ownerReferences"] = [{{"apiVersion": "v1", "kind": "ConfigMap", "name": owner["metadata"]["name"],
                                    "uid": owner["metadata"]["uid"]}}]
    return {{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}}


def seen(step: str) -> None:
    """Wait until the browser test has seen the widget show ``step``: it writes ACKS/step then."""
    Lab.wait_until(lambda: (ACKS / step).exists(), timeout=900, interval=0.1,
                   message=f"the browser test never saw {{step}}")
'''

_TREE = '''\
lab.apply(configmap("root"))
root = lab.get("configmap", "root", namespace=NS)
tree = OwnershipTree(lab, "configmap", "root", namespace=NS)
tree.start(interval=0.5)
display(tree)
seen("tree-root")
lab.apply(configmap("leaf", owner=root))
seen("tree-leaf-added")
lab.delete("configmap", "leaf", namespace=NS)
seen("tree-leaf-removed")
tree.stop()
'''

_TIMELINE = '''\
for step in ("first", "second"):
    with EventTimeline(lab, NS, ["configmaps"]) as timeline:
        lab.apply(configmap(f"timeline-{step}"))
    if step == "first":
        shown = display(timeline, display_id=True)
    else:
        shown.update(timeline)
    seen(f"timeline-{step}")
'''

_CHECK_SETUP = '''\
from krmcourse import Lab

lab = Lab("welcome").up()
'''
#: The exercise the check notebook checks without solving it, and the cell that does.
CHECKED = ("welcome", "hello-namespace")
CHECK_CELL = 1


def write(path: Path, *sources: str) -> Path:
    """A notebook of code cells, for the kernel every course notebook uses."""
    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(source) for source in sources],
        metadata={"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                  "language_info": {"name": "python"}},
    )
    nbformat.write(nb, path)
    return path


def widgets_notebook(folder: Path, acks: Path) -> Path:
    """An ownership tree refreshing in the background while its cell changes what it shows, and an
    event timeline shown and then replaced while its cell runs."""
    lab, instance = WIDGET_LAB
    setup = _SETUP.format(lab=lab, instance=instance, namespace=NAMESPACE, acks=str(acks))
    return write(folder / "widgets.ipynb", setup, _TREE, _TIMELINE)


def check_notebook(folder: Path) -> Path:
    """A learner's first check, run before solving the exercise, and not wrapped in try/except."""
    lab, exercise = CHECKED
    return write(folder / "check.ipynb", _CHECK_SETUP.replace("welcome", lab), f"lab.check({exercise!r})\n")


def hidden_inputs(path: Path) -> list[bool]:
    """For each code cell of a notebook, whether its input is hidden (the reference solutions are):
    JupyterLab then shows a placeholder without a prompt."""
    cells = nbformat.read(path, as_version=4).cells
    return [bool(c.metadata.get("jupyter", {}).get("source_hidden")) for c in cells if c.cell_type == "code"]
