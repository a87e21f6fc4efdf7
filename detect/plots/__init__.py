"""Pictures of a run: training curves, label statistics, PR / F1 curves, the confusion matrix and image
mosaics. Pure functions of plain data and a path; files are written atomically. matplotlib is imported only
when a figure is drawn (detect.plots.render). The curves and counts are computed in detect.evaluation: this
package only draws them."""

from detect.runtime.lazy import lazy_exports

_HOMES = {
    "plot_results": "detect.plots.results",
    "read_results_csv": "detect.plots.results",
    "label_statistics": "detect.plots.labels",
    "plot_labels": "detect.plots.labels",
    "plot_pr_curves": "detect.plots.curves",
    "plot_f1_curves": "detect.plots.curves",
    "plot_confusion_matrix": "detect.plots.confusion",
    "draw_mosaic": "detect.plots.mosaics",
    "batch_tiles": "detect.plots.mosaics",
    "write_eval_plots": "detect.plots.evaluation",
}
__all__ = list(_HOMES)
__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
