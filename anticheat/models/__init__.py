"""Shipped detector models (package data), loaded with ``importlib.resources``.

``aimdetect.npz`` + ``aimdetect.json``: AimDetect's per-kill SVM, written by
``anticheat.detectors.aimdetect.model.save_model``. None is shipped yet: it must be trained on labelled bot
matches, and ``load_shipped_model`` says so when the files are missing.
"""
