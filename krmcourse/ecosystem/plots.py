"""The notebook's figures, kept here so that cells stay one line long."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure


def growth_figure(growth: pd.DataFrame) -> Figure:
    """Built-in kinds and groups per Kubernetes release."""
    fig, ax = plt.subplots(figsize=(9, 3.5))
    ax.plot(growth["k8s_version"], growth["kinds"], marker="o", label="built-in kinds (group, kind)")
    ax.plot(growth["k8s_version"], growth["groups"], marker="s", label="built-in API groups")
    ax.set_xlabel("Kubernetes release")
    ax.set_ylim(bottom=0)
    ax.tick_params(axis="x", rotation=60)
    ax.legend()
    ax.set_title("The built-in API across releases (kubernetes-validate schemas)")
    fig.tight_layout()
    return fig


def adoption_figure(tables: dict[str, pd.DataFrame], talk: dict[str, float]) -> Figure:
    """Percent of kinds with each feature, one bar per population, talk figures as markers."""
    measures = list(next(iter(tables.values())).index)
    fig, ax = plt.subplots(figsize=(9, 4))
    width = 0.8 / len(tables)
    for i, (name, table) in enumerate(tables.items()):
        values = [table.loc[m, "percent"] if table.loc[m, "kinds judged"] else float("nan") for m in measures]
        ax.bar([x + i * width for x in range(len(measures))], values, width, label=name)
    xs = [measures.index(m) + 0.4 - width / 2 for m in talk]
    ax.scatter(xs, list(talk.values()), marker="D", color="black", zorder=3,
               label="reported in the 2019 talk")
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(measures))], measures, rotation=35, ha="right")
    ax.set_ylabel("% of kinds")
    ax.set_ylim(0, 105)
    ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


def top_groups_figure(per_group: pd.DataFrame, top: int = 15) -> Figure:
    """The API groups with the most kinds: a few projects hold many kinds each."""
    head = per_group.head(top).iloc[::-1]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.barh(head["group"], head["kinds"])
    ax.set_xlabel("kinds")
    ax.set_title(f"The {top} largest API groups in the dump")
    fig.tight_layout()
    return fig
