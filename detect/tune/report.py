"""What a search leaves beside its trials, from the storage alone (any worker, any machine, `--report-only`):
trials.csv and the same table printed, hyp.yaml of the best trial (the hyp file train.py ran it with), and the
pictures (detect.tune.pictures)."""

from __future__ import annotations

import csv
import io
import logging
from pathlib import Path

from detect.runtime.files import atomic_write_text
from detect.tune.pictures import draw_history, draw_importances, param_importances
from detect.tune.worker import write_hyp

log = logging.getLogger(__name__)

FIXED_COLUMNS = ("number", "state", "value", "epochs", "seconds")


def _seconds(trial) -> float | None:
    if trial.datetime_start is None or trial.datetime_complete is None:
        return None
    return (trial.datetime_complete - trial.datetime_start).total_seconds()


def trial_table(trials) -> tuple[list[str], list[dict]]:
    """(columns, one row per trial): number, state, value, epochs run, seconds, each searched key, note, run."""
    params = list(dict.fromkeys(k for t in trials for k in t.params))
    rows = []
    for t in sorted(trials, key=lambda t: t.number):
        note = t.user_attrs.get("note", "")
        if "failed_trial" in t.system_attrs:
            note = f"retry of {t.system_attrs['failed_trial']}" + (f"; {note}" if note else "")
        rows.append({"number": t.number, "state": t.state.name.lower(), "value": t.value,
                     "epochs": t.user_attrs.get("epochs", max(t.intermediate_values, default=0)),
                     "seconds": _seconds(t), **{k: t.params.get(k) for k in params}, "note": note,
                     "run": t.user_attrs.get("run_dir", "")})
    return [*FIXED_COLUMNS, *params, "note", "run"], rows


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def format_table(columns: list[str], rows: list[dict], width_of_note: int = 40) -> str:
    """The table as aligned text (the run folder left out: it is in trials.csv)."""
    shown = [c for c in columns if c != "run"]
    cells = [[_cell(r[c])[:width_of_note] for c in shown] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(shown)]
    lines = ["  ".join(c.rjust(w) if c != "note" else c for c, w in zip(shown, widths))]
    lines += ["  ".join(v.rjust(w) if c != "note" else v for v, c, w in zip(row, shown, widths)) for row in cells]
    return "\n".join(lines)


def write_csv(path: Path, columns: list[str], rows: list[dict]) -> None:
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({c: "" if r[c] is None else r[c] for c in columns})
    atomic_write_text(path, out.getvalue())


def write_report(study, study_dir: Path) -> str:
    """Write trials.csv, hyp.yaml (when a trial is complete), history.png and importance.png into `study_dir`;
    the text to print (the table and where the files are)."""
    import optuna

    study_dir.mkdir(parents=True, exist_ok=True)
    trials = study.get_trials(deepcopy=False)
    columns, rows = trial_table(trials)
    write_csv(study_dir / "trials.csv", columns, rows)
    complete = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE]
    counts = {s: sum(r["state"] == s for r in rows) for s in ("complete", "pruned", "fail", "running", "waiting")}
    summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    title = f"study {study.study_name}: {summary or 'no trials'}"
    draw_history(trials, study_dir / "history.png", title)
    importances, why_not = param_importances(study)
    few = "; too few to trust" if len(complete) < 10 else ""
    draw_importances(importances, study_dir / "importance.png", f"study {study.study_name}: parameter importances\n"
                     f"({len(complete)} complete trials{few})", why_not)
    text = [format_table(columns, rows), "", title]
    if complete:
        best = max(complete, key=lambda t: t.value)
        hyp = best.user_attrs.get("hyp", best.params)
        write_hyp(study_dir / "hyp.yaml", hyp, f"the best trial of study {study.study_name}: trial {best.number}, "
                  f"fitness {best.value:.6g}; train.py --hyp this file (with the search's train.py arguments)")
        text.append(f"best: trial {best.number}, fitness {best.value:.4g} ({best.user_attrs.get('run_dir', '')})")
        text.append(f"{study_dir / 'hyp.yaml'}: its hyperparameters, for train.py --hyp; its fitness was measured on "
                    f"the split it was chosen on, which flatters it: compare it with the default on images no "
                    f"trial evaluated (docs/tuning.md, 'Scored where the search never looked')")
    else:
        text.append("no complete trial yet: no hyp.yaml")
    text.append(f"{study_dir}: trials.csv, history.png, importance.png")
    return "\n".join(text)
