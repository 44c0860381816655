"""Shipped detector models and calibrations (package data), loaded with ``importlib.resources``.

- ``aimdetect.npz`` + ``aimdetect.json``: AimDetect's per-kill classifier (gradient-boosted trees as
  arrays, with its held-out rates), written by ``referee lab train-aimdetect``.
- ``sanctions.toml``: the sanction policy's calibrated kind weights, written by
  ``referee lab calibrate --out``; a ``--tolerances`` file, read as the policy's defaults.
"""
