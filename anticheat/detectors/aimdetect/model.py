"""AimDetect's per-kill classifier: training, held-out rates, and pickle-free persistence.

The classifier is scikit-learn's RBF-kernel ``SVC`` behind a ``StandardScaler`` (a ``Pipeline``),
as in the paper (REFERENCES section 5: TPR 83.6 %, FPR 5.8 % per kill on CS 1.6). ``train``
measures the true- and false-positive rates on a stratified held-out split; they become theta1 and
theta0 of the Threshold Random Walk, so they must be measured, never assumed.

A trained model is stored as two plain files that need no pickle trust and no scikit-learn to
load: ``<name>.npz`` (scaler mean/scale, support vectors, dual coefficients, loaded with
``allow_pickle=False``) and ``<name>.json`` (kernel parameters, intercept, feature names, measured
rates and counts, versions). Prediction re-implements the RBF decision function in one compiled
pass, f(x) = sum_i a_i exp(-gamma |s_i - z|^2) + b with z the scaled features; ``train`` checks it
against scikit-learn's own ``decision_function`` before returning. (A kill is judged inside a
server tick: the numpy form's dozen calls, and a BLAS product whose rounding depends on the
CPU's kernels, cost more than its arithmetic.)
"""

from __future__ import annotations

import importlib.resources
import io
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

import math

import numba
import numpy as np

log = logging.getLogger(__name__)

__all__ = ["FORMAT_VERSION", "ModelMissingError", "TrainedModel", "load_model", "load_shipped_model",
           "save_model", "train"]

FORMAT_VERSION = 1
SHIPPED_MODEL = "aimdetect"
"""Stem of the model shipped in ``anticheat/models/`` (``aimdetect.npz`` + ``aimdetect.json``)."""


class ModelMissingError(FileNotFoundError):
    """The requested model files are not there."""


@dataclass(frozen=True, eq=False)
class TrainedModel:
    """A trained per-kill classifier with its measured held-out rates.

    Attributes:
        feature_names: the feature order the model expects.
        scaler_mean, scaler_scale: StandardScaler's parameters, shape (n_features,).
        support_vectors: shape (n_sv, n_features), in scaled space.
        dual_coef: shape (n_sv,), signed so that f(x) > 0 means "cheater".
        intercept, gamma: of the decision function.
        threshold: a kill is positive when f(x) > threshold (0, the SVM's own boundary).
        tp, fn, fp, tn: held-out confusion counts (positive = cheater).
        tpr, fpr: held-out rates used as the TRW's theta1, theta0. Smoothed as (k + 0.5) / (n + 1)
            (Jeffreys' estimate) so that a perfect held-out score never yields a rate of exactly
            0 or 1, which would make one kill infinitely strong evidence.
        meta: training parameters and versions (C, seed, test_size, sizes, sklearn version).
    """

    feature_names: tuple[str, ...]
    scaler_mean: np.ndarray
    scaler_scale: np.ndarray
    support_vectors: np.ndarray
    dual_coef: np.ndarray
    intercept: float
    gamma: float
    threshold: float
    tp: int
    fn: int
    fp: int
    tn: int
    meta: dict[str, object] = field(default_factory=dict)

    @property
    def tpr(self) -> float:
        """Held-out true-positive rate (smoothed), the TRW's theta1."""
        return (self.tp + 0.5) / (self.tp + self.fn + 1.0)

    @property
    def fpr(self) -> float:
        """Held-out false-positive rate (smoothed), the TRW's theta0."""
        return (self.fp + 0.5) / (self.fp + self.tn + 1.0)

    def decision_function(self, features: np.ndarray) -> np.ndarray:
        """f(x) for each row of ``features`` (shape (n, n_features) or (n_features,))."""
        x = np.ascontiguousarray(np.atleast_2d(np.asarray(features, dtype=np.float64)))
        if x.ndim != 2 or x.shape[1] != self.scaler_mean.shape[0]:
            raise ValueError(f"expected {self.scaler_mean.shape[0]} features, got {x.shape[-1]}")
        out = np.empty(x.shape[0])
        c = np.ascontiguousarray
        _rbf_decision(x, c(self.scaler_mean, dtype=np.float64), c(self.scaler_scale, dtype=np.float64),
                      c(self.support_vectors, dtype=np.float64), c(self.dual_coef, dtype=np.float64),
                      float(self.gamma), float(self.intercept), out)
        return out

    def predict(self, features: np.ndarray) -> np.ndarray:
        """True where a kill is classified as an aimbot's."""
        return self.decision_function(features) > self.threshold


@numba.njit(cache=True, nogil=True)
def _rbf_decision(
    x: np.ndarray, mean: np.ndarray, scale: np.ndarray, sv: np.ndarray, coef: np.ndarray, gamma: float,
    intercept: float, out: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """f(x) of each row of ``x``: z = (x - mean) / scale, |s - z|^2 as z.z - 2 z.s + s.s (the
    numpy form's expansion), clipped at 0, through exp(-gamma d2) weighted by ``coef``."""
    n_sv, k = sv.shape
    z = np.empty(k)
    for i in range(x.shape[0]):
        zz = 0.0
        for c in range(k):
            z[c] = (x[i, c] - mean[c]) / scale[c]
            zz += z[c] * z[c]
        acc = 0.0
        for j in range(n_sv):
            dot = 0.0
            ss = 0.0
            for c in range(k):
                dot += z[c] * sv[j, c]
                ss += sv[j, c] * sv[j, c]
            acc += math.exp(-gamma * max(zz - 2.0 * dot + ss, 0.0)) * coef[j]
        out[i] = acc + intercept


def train(
    features: np.ndarray, labels: np.ndarray, seed: int, *,
    feature_names: tuple[str, ...] | None = None, test_size: float = 0.3, c: float = 1.0,
) -> TrainedModel:
    """Fit scaler + RBF SVM on a stratified split and measure TPR/FPR on the held-out part.

    ``labels`` are 1 for kills by cheaters and 0 for honest kills. The returned model is the
    one fitted on the training part, so its rates describe exactly the model that is used.
    ``gamma`` is 1 / n_features: what scikit-learn's ``"scale"`` gives on standardised features,
    fixed explicitly so the persisted model carries the value used.
    """
    from sklearn import __version__ as sklearn_version
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC

    x = np.asarray(features, dtype=np.float64)
    y = np.asarray(labels).astype(np.int64).ravel()
    if x.ndim != 2 or x.shape[0] != y.shape[0]:
        raise ValueError(f"features must be (n, k) with one label per row, got {x.shape} and {y.shape}")
    if not np.isfinite(x).all():
        raise ValueError("features contain nan or inf")
    if set(np.unique(y).tolist()) != {0, 1}:
        raise ValueError("labels must contain both 0 (honest) and 1 (cheater) and nothing else")
    names = feature_names or tuple(f"f{i + 1}" for i in range(x.shape[1]))
    if len(names) != x.shape[1]:
        raise ValueError("feature_names does not match the number of columns")
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=test_size, stratify=y, random_state=seed)
    gamma = 1.0 / x.shape[1]
    pipe = Pipeline([("scale", StandardScaler()), ("svm", SVC(kernel="rbf", C=c, gamma=gamma))])
    pipe.fit(x_tr, y_tr)
    pred = pipe.predict(x_te).astype(bool)
    truth = y_te.astype(bool)
    scaler: StandardScaler = pipe.named_steps["scale"]
    svm: SVC = pipe.named_steps["svm"]
    if list(svm.classes_) != [0, 1]:
        raise ValueError(f"unexpected classes {svm.classes_!r}")
    model = TrainedModel(
        feature_names=tuple(names),
        scaler_mean=np.asarray(scaler.mean_, dtype=np.float64).copy(),
        scaler_scale=np.asarray(scaler.scale_, dtype=np.float64).copy(),
        support_vectors=np.asarray(svm.support_vectors_, dtype=np.float64).copy(),
        # For two classes scikit-learn exposes coefficients already signed for classes_[1].
        dual_coef=np.asarray(svm.dual_coef_, dtype=np.float64)[0].copy(),
        intercept=float(svm.intercept_[0]),
        gamma=gamma,
        threshold=0.0,
        tp=int(np.sum(pred & truth)), fn=int(np.sum(~pred & truth)),
        fp=int(np.sum(pred & ~truth)), tn=int(np.sum(~pred & ~truth)),
        meta={"c": c, "seed": seed, "test_size": test_size, "n_train": int(y_tr.size),
              "n_test": int(y_te.size), "n_support": int(svm.support_vectors_.shape[0]),
              "sklearn": sklearn_version},
    )
    ours = model.decision_function(x_te)
    theirs = pipe.decision_function(x_te)
    if not np.allclose(ours, theirs, rtol=1e-7, atol=1e-7):
        raise RuntimeError("numpy decision function disagrees with scikit-learn's; the export is wrong")
    log.info("aimdetect model: TPR %.3f FPR %.3f on %d held-out kills", model.tpr, model.fpr, y_te.size)
    return model


def _json_path(npz_path: Path) -> Path:
    return npz_path.with_suffix(".json")


def save_model(model: TrainedModel, path: str | Path) -> Path:
    """Write ``path`` (``.npz``, suffix added if missing) and its ``.json`` sidecar; returns the npz path."""
    npz = Path(path)
    if npz.suffix != ".npz":
        npz = npz.with_name(npz.name + ".npz")
    npz.parent.mkdir(parents=True, exist_ok=True)
    np.savez(npz, scaler_mean=model.scaler_mean, scaler_scale=model.scaler_scale,
             support_vectors=model.support_vectors, dual_coef=model.dual_coef)
    header = {
        "format": "referee-aimdetect-svm", "version": FORMAT_VERSION, "kernel": "rbf",
        "feature_names": list(model.feature_names), "intercept": model.intercept, "gamma": model.gamma,
        "threshold": model.threshold, "tp": model.tp, "fn": model.fn, "fp": model.fp, "tn": model.tn,
        "tpr": model.tpr, "fpr": model.fpr, "meta": model.meta,
    }
    _json_path(npz).write_text(json.dumps(header, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return npz


def load_model(path: str | Path) -> TrainedModel:
    """Read a model written by ``save_model`` (no pickle is ever loaded)."""
    npz = Path(path)
    if npz.suffix != ".npz":
        npz = npz.with_name(npz.name + ".npz")
    sidecar = _json_path(npz)
    if not npz.is_file() or not sidecar.is_file():
        raise ModelMissingError(f"AimDetect model needs both {npz} and {sidecar}")
    return _from_parts(sidecar.read_text(encoding="utf-8"), npz.read_bytes(), str(npz))


def _from_parts(header_text: str, npz_bytes: bytes, where: str) -> TrainedModel:
    header = json.loads(header_text)
    if header.get("format") != "referee-aimdetect-svm" or header.get("version") != FORMAT_VERSION:
        raise ValueError(f"{where}: not a version-{FORMAT_VERSION} AimDetect model")
    with np.load(io.BytesIO(npz_bytes), allow_pickle=False) as arrays:
        mean = arrays["scaler_mean"].astype(np.float64)
        scale = arrays["scaler_scale"].astype(np.float64)
        sv = arrays["support_vectors"].astype(np.float64)
        coef = arrays["dual_coef"].astype(np.float64)
    k = len(header["feature_names"])
    if mean.shape != (k,) or scale.shape != (k,) or sv.ndim != 2 or sv.shape[1] != k or coef.shape != (sv.shape[0],):
        raise ValueError(f"{where}: array shapes do not match {k} features")
    return TrainedModel(
        feature_names=tuple(header["feature_names"]), scaler_mean=mean, scaler_scale=scale,
        support_vectors=sv, dual_coef=coef, intercept=float(header["intercept"]), gamma=float(header["gamma"]),
        threshold=float(header["threshold"]), tp=int(header["tp"]), fn=int(header["fn"]),
        fp=int(header["fp"]), tn=int(header["tn"]), meta=dict(header.get("meta", {})),
    )


def load_shipped_model(name: str = SHIPPED_MODEL) -> TrainedModel:
    """The model shipped as package data in ``anticheat/models/``.

    Raises ModelMissingError naming the files when it is not there (no model is shipped until one
    is trained on labelled bot matches). Reads through ``importlib.resources``, so it also works
    from a zipped install.
    """
    root = importlib.resources.files("anticheat.models")
    npz = root.joinpath(f"{name}.npz")
    sidecar = root.joinpath(f"{name}.json")
    if not npz.is_file() or not sidecar.is_file():
        raise ModelMissingError(
            f"no shipped AimDetect model {name!r}: anticheat/models/{name}.npz and {name}.json are missing; "
            "train one on labelled bot matches and save it there with save_model()"
        )
    return _from_parts(sidecar.read_text(encoding="utf-8"), npz.read_bytes(), f"anticheat.models/{name}")
