"""Label errors found box by box (`python -m detect.audit`, detect-audit): the model's detections compared with
the labels (evidence), its confidences calibrated on the split (calibration), one score per suspected error
(scoring), the files and pictures written (report, label_lines, sheet), and the fold models of --folds (folds)."""
