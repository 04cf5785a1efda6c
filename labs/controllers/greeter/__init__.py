"""The Greeting controller of the controllers lab, in small parts a notebook can show one by one.

model: the desired state (pure); actions: the REST calls; reconcile: observe, compare, act, report;
workqueue: de-duplicated keys; informer: list, watch, cache, re-list; controller: the wiring;
once: run one reconcile in-process (used by the exercises' solutions).
"""
