"""Pictures of a search, drawn from the storage with matplotlib (no plotly):
- history.png: each trial's value by trial number (pruned trials at their last reported fitness) with the best so
  far, and beside it every trial's fitness per epoch, where the pruned ones stop;
- importance.png: how much each searched hyperparameter explains the good trials (Optuna's PED-ANOVA evaluator,
  which needs no scikit-learn, unlike its fANOVA and mean-decrease-impurity ones).
"""

from __future__ import annotations

import warnings
from pathlib import Path

from detect.plots.render import new_figure, save_figure

COMPLETE, PRUNED = "#1f77b4", "#999999"


def draw_history(trials, path: Path, title: str) -> Path:
    """`trials`: Optuna FrozenTrials (any states; complete and pruned ones are drawn)."""
    from matplotlib.ticker import MaxNLocator

    fig, axes = new_figure(12, 4.5, 1, 2)
    values, epochs = axes[0, 0], axes[0, 1]
    complete = [t for t in trials if t.state.name == "COMPLETE" and t.value is not None]
    pruned = [t for t in trials if t.state.name == "PRUNED" and t.intermediate_values]
    values.scatter([t.number for t in complete], [t.value for t in complete], color=COMPLETE, zorder=3,
                   label=f"complete ({len(complete)})")
    if pruned:
        values.scatter([t.number for t in pruned], [t.intermediate_values[max(t.intermediate_values)] for t in pruned],
                       color=PRUNED, marker="x", zorder=3, label=f"pruned ({len(pruned)}): last fitness")
    if complete:
        best, xs, ys = float("-inf"), [], []
        for t in sorted(complete, key=lambda t: t.number):
            best = max(best, t.value)
            xs.append(t.number)
            ys.append(best)
        last = max(t.number for t in complete + pruned)
        xs, ys = xs + [last] * (last > xs[-1]), ys + [best] * (last > xs[-1])  # on to the last trial drawn
        values.step(xs, ys, where="post", color="#d62728", label="best so far")
    best_number = max(complete, key=lambda t: t.value).number if complete else None
    if complete:
        best = next(t for t in complete if t.number == best_number)
        values.scatter([best.number], [best.value], s=140, facecolors="none", edgecolors="#d62728", linewidths=1.5,
                       zorder=4, label=f"best: trial {best.number}")
    values.set(xlabel="trial", ylabel="fitness (best epoch of the trial)", title=title)
    values.grid(alpha=0.3)
    values.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=4, fontsize=8, frameon=False)
    for t in sorted(complete + pruned, key=lambda t: t.number):
        steps = sorted(t.intermediate_values)
        if t.state.name == "PRUNED":
            style = dict(color=PRUNED, linestyle="--", alpha=0.8)
        else:
            style = dict(color="#d62728", linewidth=2.2, zorder=3) if t.number == best_number else \
                dict(color=COMPLETE, alpha=0.6)
        epochs.plot(steps, [t.intermediate_values[s] for s in steps], marker=".", **style)
        if t.number == best_number:
            epochs.annotate(f"trial {t.number}", (steps[-1], t.intermediate_values[steps[-1]]), fontsize=8,
                            xytext=(4, 0), textcoords="offset points", color="#d62728")
    epochs.set(xlabel="epoch", ylabel="fitness", title="fitness per epoch (grey: pruned; red: the best trial)")
    epochs.grid(alpha=0.3)
    for ax in (values, epochs):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    return save_figure(fig, path)


def param_importances(study) -> tuple[dict[str, float], str]:
    """({param: importance}, '') from the complete trials, or ({}, why not)."""
    import optuna

    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    if len(complete) < 2 or len({t.value for t in complete}) < 2:
        return {}, f"needs 2 complete trials with different values ({len(complete)} complete)"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PED-ANOVA is marked experimental
        try:
            evaluator = optuna.importance.PedAnovaImportanceEvaluator()
            return optuna.importance.get_param_importances(study, evaluator=evaluator), ""
        except (ValueError, RuntimeError) as e:
            return {}, f"could not be computed: {e}"


def draw_importances(importances: dict[str, float], path: Path, title: str, why_not: str = "") -> Path:
    fig, axes = new_figure(7, 0.8 + 0.32 * max(len(importances), 3))
    ax = axes[0, 0]
    if importances:
        names = list(importances)[::-1]  # the most important at the top
        scores = [importances[n] for n in names]
        bars = ax.barh(names, scores, color=COMPLETE)
        for bar, score in zip(bars, scores):
            ax.text(bar.get_width(), bar.get_y() + bar.get_height() / 2, f" {score:.2f}", va="center", fontsize=8)
        ax.set_xlim(0, max(scores) * 1.15 or 1)
        ax.set_xlabel("importance (PED-ANOVA, sums to 1)")
    else:
        ax.text(0.5, 0.5, f"parameter importances {why_not}", ha="center", va="center", wrap=True)
        ax.set_axis_off()
    ax.set_title(title)
    return save_figure(fig, path)
