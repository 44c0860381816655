"""The tuning lab: labelled corpora, offline re-detection, metrics with intervals, tolerance search.

One module per concept: ``spec`` (what a corpus is), ``store`` (the DuckDB database), ``corpus``
(playing the matches: worker processes or Ray), ``redetect`` (re-running the detectors over
stored event streams), ``metrics`` (rates, intervals, ROC, time to detect), ``aggregate`` (the
corpus's numbers, from SQL), ``tune`` (Optuna), ``report`` (the HTML page).
"""
