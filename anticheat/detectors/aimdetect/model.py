"""AimDetect's per-kill classifier: gradient-boosted trees, measured rates, pickle-free persistence.

The classifier is scikit-learn's ``HistGradientBoostingClassifier`` (binary log-loss). It replaced
the paper's RBF SVM (REFERENCES section 5) because, cross-validated by match on our lab corpus, it
separates far better (AUC 0.93 against 0.87; at 5 % honest FPR, TPR 0.74 against 0.45): per-kill
features are skewed counts and heavy-tailed rates that trees split without any scaling, and it
takes missing features (NaN) natively.

Units: ``TrainedModel.score`` is the raw log-odds that a kill is an aimbot's (natural log,
log(p / (1 - p))), the boosting baseline plus one leaf value per tree; it is not a probability.
A kill is positive when its score is above ``threshold``, which ``train`` chooses as the honest
out-of-fold (or hold-out) score quantile that keeps the honest false-positive rate at or under
``target_fpr``. The true- and false-positive rates measured there become theta1 and theta0 of the
Threshold Random Walk, so they are measured on kills the model never trained on, never assumed:
with ``groups`` (a match id per kill) the folds are ``GroupKFold``, so no match is both trained on
and scored. The final model is then fitted on all rows; its out-of-fold rates estimate it.

A trained model is stored as two plain files that need no pickle trust and no scikit-learn to
load: ``<stem>.npz`` (the trees as flat node arrays, read with ``allow_pickle=False``) and
``<stem>.json`` (format version, feature names, threshold, measured rates and counts per group,
the thinned held-out ROC, training parameters and library versions). Pickle is refused because a
model file is data a server loads at start: unpickling would run whatever code the file names.

The tree layout: all trees' nodes concatenated; ``roots[t]`` is tree t's root; a node is a leaf
when ``is_leaf``, else it sends a row to ``left`` (global node index) when the feature value is
``<= num_threshold``, to ``right`` when above, and a NaN to ``left`` when ``missing_left``. This
is scikit-learn's own ``TreePredictor`` walk (numeric splits only), summed in its order (baseline
first, then tree by tree), so the scores equal its ``decision_function``. Prediction runs in one
compiled numba pass with no scikit-learn call: a kill is judged inside a server tick.
"""

from __future__ import annotations

import importlib.resources
import io
import json
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numba
import numpy as np

log = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_PARAMS",
    "FORMAT_VERSION",
    "ROC_POINTS",
    "ROC_READINGS",
    "SHIPPED_MODEL",
    "ModelFormatError",
    "ModelMissingError",
    "TrainedModel",
    "evaluate",
    "fold_assignment",
    "jeffreys",
    "load_model",
    "load_shipped_model",
    "model_parts",
    "reference_scores",
    "save_model",
    "train",
]

FORMAT_VERSION = 2
FORMAT_NAME = "referee-aimdetect-hgb"
SHIPPED_MODEL = "aimdetect"
"""Stem of the model shipped in ``anticheat/models/`` (``aimdetect.npz`` + ``aimdetect.json``)."""

ROC_POINTS = 200
"""Most points kept of a held-out ROC curve (stored in the JSON sidecar)."""

ROC_READINGS: tuple[float, ...] = (0.01, 0.02, 0.05, 0.06, 0.10)
"""False-positive rates at which ``evaluate`` reads the ROC's best TPR (``tpr_at_fpr``)."""

DEFAULT_PARAMS: Mapping[str, Any] = MappingProxyType({
    "max_iter": 300,
    "learning_rate": 0.05,
    "max_leaf_nodes": 31,
    "l2_regularization": 1.0,
    "early_stopping": False,
})
"""``HistGradientBoostingClassifier`` parameters ``train`` uses unless ``params`` overrides them
(``random_state`` defaults to the seed; ``categorical_features`` is always None)."""

_TREE_ARRAYS = ("roots", "feature", "num_threshold", "missing_left", "left", "right", "is_leaf", "value")


class ModelMissingError(FileNotFoundError):
    """The requested model files are not there."""


class ModelFormatError(ValueError):
    """A model file is not a version-``FORMAT_VERSION`` AimDetect model, or is malformed."""


def jeffreys(k: int, n: int) -> float:
    """Jeffreys' estimate (k + 0.5) / (n + 1) of a rate seen k times in n trials.

    It never gives exactly 0 or 1, so one kill is never infinitely strong evidence in the sequential test.
    """
    return (k + 0.5) / (n + 1.0)


def _frozen_array(a: Any, dtype: type) -> np.ndarray:
    out = np.array(a, dtype=dtype, copy=True, order="C")
    out.flags.writeable = False
    return out


@dataclass(frozen=True, eq=False)
class TrainedModel:
    """A trained per-kill classifier, its decision threshold and its measured held-out rates.

    Attributes:
        feature_names: the feature order the model expects.
        threshold: a kill is positive when ``score(x) > threshold`` (log-odds).
        tpr, fpr: held-out rates at ``threshold``, Jeffreys-smoothed (k + 0.5) / (n + 1): the
            sequential test's theta1 and theta0.
        fpr_by_group: smoothed held-out FPR per honest stratum label ({} when no strata were given).
        tpr_by_group: smoothed held-out TPR per positive stratum label ({} when none).
        tp, fn, fp, tn: held-out confusion counts at ``threshold`` (positive = cheater).
        roc_fpr, roc_tpr, roc_threshold: the held-out ROC curve (``roc_curve``), thinned to at most
            ``ROC_POINTS`` points; the first threshold is +inf (nothing positive).
        auc: held-out area under the (unthinned) ROC curve.
        target_fpr: the honest FPR the threshold was chosen for.
        baseline: the boosting's constant log-odds (scikit-learn's ``_baseline_prediction``).
        roots: (n_trees,) index of each tree's root node.
        feature, num_threshold, missing_left, left, right, is_leaf, value: (n_nodes,) node arrays,
            see the module docstring; ``value`` is a leaf's log-odds contribution.
        meta: seed, row counts, how the rates were measured, parameters, library versions.
    """

    feature_names: tuple[str, ...]
    threshold: float
    tpr: float
    fpr: float
    fpr_by_group: Mapping[str, float]
    tpr_by_group: Mapping[str, float]
    tp: int
    fn: int
    fp: int
    tn: int
    roc_fpr: np.ndarray
    roc_tpr: np.ndarray
    roc_threshold: np.ndarray
    auc: float
    target_fpr: float
    baseline: float
    roots: np.ndarray
    feature: np.ndarray
    num_threshold: np.ndarray
    missing_left: np.ndarray
    left: np.ndarray
    right: np.ndarray
    is_leaf: np.ndarray
    value: np.ndarray
    meta: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Arrays are copied to the dtypes the kernel is compiled for and made read-only, so a
        # model is immutable and one compiled signature serves every model.
        put = object.__setattr__
        put(self, "feature_names", tuple(str(n) for n in self.feature_names))
        put(self, "fpr_by_group", MappingProxyType({str(k): float(v) for k, v in self.fpr_by_group.items()}))
        put(self, "tpr_by_group", MappingProxyType({str(k): float(v) for k, v in self.tpr_by_group.items()}))
        put(self, "meta", MappingProxyType(dict(self.meta)))
        for name in ("roc_fpr", "roc_tpr", "roc_threshold", "num_threshold", "value"):
            put(self, name, _frozen_array(getattr(self, name), np.float64))
        for name in ("roots", "feature", "left", "right"):
            put(self, name, _frozen_array(getattr(self, name), np.int64))
        for name in ("missing_left", "is_leaf"):
            put(self, name, _frozen_array(getattr(self, name), np.bool_))
        _check_trees(self.roots, self.feature, self.num_threshold, self.missing_left, self.left, self.right,
                     self.is_leaf, self.value, len(self.feature_names))

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled (to worker processes) as the files it is saved as: a lab job carries the model
        # its corpus started with, whatever happens to the files on disk meanwhile.
        return _from_parts, (*model_parts(self), "<pickled AimDetect model>")

    @property
    def n_features(self) -> int:
        """Number of features a row must have."""
        return len(self.feature_names)

    @property
    def n_trees(self) -> int:
        """Number of trees (boosting iterations)."""
        return int(self.roots.shape[0])

    @property
    def fpr_worst(self) -> float:
        """The highest per-group held-out FPR, or the overall FPR when there are no groups."""
        return max(self.fpr_by_group.values(), default=self.fpr)

    def score(self, x: np.ndarray) -> np.ndarray:
        """Log-odds of "aimbot" for each row of ``x`` ((n, n_features) or (n_features,)) -> (n,).

        NaN features are missing values and follow each split's learned side.
        """
        rows = np.asarray(x, dtype=np.float64)
        if rows.ndim == 1:
            rows = rows[None, :]
        if rows.ndim != 2 or rows.shape[1] != len(self.feature_names):
            raise ValueError(f"expected {len(self.feature_names)} features per row, got shape {np.shape(x)}")
        out = np.empty(rows.shape[0], dtype=np.float64)
        _forest_scores(np.ascontiguousarray(rows), self.roots, self.feature, self.num_threshold,
                       self.missing_left, self.left, self.right, self.is_leaf, self.value, self.baseline, out)
        return out

    def predict(self, x: np.ndarray) -> np.ndarray:
        """True (per row) where a kill is classified as an aimbot's: ``score(x) > threshold``."""
        return self.score(x) > self.threshold


def _check_trees(roots: np.ndarray, feature: np.ndarray, num_threshold: np.ndarray, missing_left: np.ndarray,
                 left: np.ndarray, right: np.ndarray, is_leaf: np.ndarray, value: np.ndarray,
                 n_features: int) -> None:
    """Refuse node arrays the kernel could index out of bounds or loop forever on.

    Each tree owns the nodes from its root up to the next root; a split's children lie after it
    inside its own tree (scikit-learn numbers nodes in pre-order), so every walk ends at a leaf.
    """
    n = feature.shape[0]
    if roots.ndim != 1 or roots.shape[0] == 0:
        raise ModelFormatError("a model needs at least one tree")
    for name, a in (("num_threshold", num_threshold), ("missing_left", missing_left), ("left", left),
                    ("right", right), ("is_leaf", is_leaf), ("value", value)):
        if a.shape != (n,):
            raise ModelFormatError(f"node array {name} has shape {a.shape}, expected ({n},)")
    if roots[0] != 0 or np.any(np.diff(roots) <= 0) or roots[-1] >= n:
        raise ModelFormatError("tree roots must start at 0 and increase inside the node arrays")
    if not np.all(np.isfinite(value[is_leaf])):
        raise ModelFormatError("leaf values must be finite")
    end = np.empty(n, dtype=np.int64)
    bounds = np.r_[roots, n]
    for t in range(roots.shape[0]):
        end[bounds[t]:bounds[t + 1]] = bounds[t + 1]
    split = ~is_leaf
    idx = np.arange(n)
    ok = ((feature[split] >= 0) & (feature[split] < n_features)
          & (left[split] > idx[split]) & (left[split] < end[split])
          & (right[split] > idx[split]) & (right[split] < end[split]))
    if not np.all(ok):
        raise ModelFormatError("a split node has a feature index or child outside its tree")


@numba.njit(cache=True, nogil=True)
def _forest_scores(
    x: np.ndarray, roots: np.ndarray, feature: np.ndarray, num_threshold: np.ndarray, missing_left: np.ndarray,
    left: np.ndarray, right: np.ndarray, is_leaf: np.ndarray, value: np.ndarray, baseline: float,
    out: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """out[i] = baseline + sum over trees of the leaf row i reaches (scikit-learn's order)."""
    for i in range(x.shape[0]):
        acc = baseline
        for t in range(roots.shape[0]):
            node = roots[t]
            while not is_leaf[node]:
                v = x[i, feature[node]]
                if math.isnan(v):
                    go_left = missing_left[node]
                else:
                    go_left = v <= num_threshold[node]
                node = left[node] if go_left else right[node]
            acc += value[node]
        out[i] = acc


def reference_scores(model: TrainedModel, x: np.ndarray) -> np.ndarray:
    """Plain-Python twin of the compiled kernel (slow; for tests): log-odds per row of ``x``."""
    rows = np.atleast_2d(np.asarray(x, dtype=np.float64))
    out = []
    for row in rows:
        acc = model.baseline
        for root in model.roots.tolist():
            node = root
            while not model.is_leaf[node]:
                v = float(row[model.feature[node]])
                go_left = bool(model.missing_left[node]) if math.isnan(v) else v <= model.num_threshold[node]
                node = int(model.left[node] if go_left else model.right[node])
            acc += float(model.value[node])
        out.append(acc)
    return np.array(out, dtype=np.float64)


# --- training -------------------------------------------------------------------------------------


def _check_xy(x: Any, y: Any, n_features: int | None, what: str) -> tuple[np.ndarray, np.ndarray]:
    xs = np.asarray(x, dtype=np.float64)
    ys = np.asarray(y).ravel()
    if xs.ndim != 2 or xs.shape[0] != ys.shape[0]:
        raise ValueError(f"{what}: features must be (n, k) with one label per row, got {xs.shape} and {ys.shape}")
    if n_features is not None and xs.shape[1] != n_features:
        raise ValueError(f"{what}: expected {n_features} feature columns, got {xs.shape[1]}")
    if np.isinf(xs).any():
        raise ValueError(f"{what}: features contain inf (NaN is allowed: it is a missing value)")
    labels = set(np.unique(ys).tolist())
    if labels != {0, 1}:
        raise ValueError(f"{what}: labels must contain both 0 (honest) and 1 (cheater) and nothing else, "
                         f"got {sorted(labels)!r}")
    return xs, ys.astype(np.int64)


def _check_strata(strata: Any, n: int, what: str) -> np.ndarray | None:
    if strata is None:
        return None
    s = np.asarray(strata).astype(str).ravel()
    if s.shape[0] != n:
        raise ValueError(f"{what}: strata has {s.shape[0]} labels for {n} rows")
    return s


def fold_assignment(y: np.ndarray, groups: np.ndarray | None, seed: int) -> np.ndarray:
    """The cross-validation fold (0..k-1) that scores each row, as ``train`` uses it.

    With ``groups``: ``GroupKFold(n_splits=min(5, n_groups))``, so all rows of one group (match)
    share a fold and a row is only ever scored by a model that saw none of its group. Without:
    ``StratifiedKFold(5)`` shuffled with ``seed``.
    """
    from sklearn.model_selection import GroupKFold, StratifiedKFold

    ys = np.asarray(y).ravel()
    fold = np.full(ys.shape[0], -1, dtype=np.int64)
    if groups is not None:
        g = np.asarray(groups).ravel()
        if g.shape[0] != ys.shape[0]:
            raise ValueError(f"groups has {g.shape[0]} ids for {ys.shape[0]} rows")
        n_groups = np.unique(g).shape[0]
        if n_groups < 2:
            raise ValueError("group cross-validation needs at least 2 groups")
        splits = GroupKFold(n_splits=min(5, n_groups)).split(np.zeros((ys.shape[0], 1)), ys, g)
    else:
        splits = StratifiedKFold(n_splits=5, shuffle=True, random_state=seed).split(np.zeros((ys.shape[0], 1)), ys)
    for k, (_, test) in enumerate(splits):
        fold[test] = k
    return fold


def _classifier(params: Mapping[str, Any] | None, seed: int) -> Any:
    from sklearn.ensemble import HistGradientBoostingClassifier

    merged: dict[str, Any] = {**DEFAULT_PARAMS, "random_state": seed, **(params or {})}
    if merged.get("categorical_features") is not None:
        raise ValueError("categorical features are not supported: the exported trees hold numeric splits only")
    if merged.get("loss", "log_loss") != "log_loss":
        raise ValueError("only loss='log_loss' gives log-odds scores")
    merged["categorical_features"] = None
    return HistGradientBoostingClassifier(**merged)


def _export(clf: Any) -> dict[str, Any]:
    """The fitted classifier's trees as flat node arrays (see the module docstring)."""
    if list(clf.classes_) != [0, 1]:
        raise ValueError(f"unexpected classes {clf.classes_!r}")
    baseline = np.asarray(clf._baseline_prediction, dtype=np.float64).ravel()
    if baseline.shape != (1,):
        raise RuntimeError(f"expected one tree per iteration (binary), got baseline {baseline.shape}")
    roots, parts = [], []
    offset = 0
    for per_iteration in clf._predictors:
        if len(per_iteration) != 1:
            raise RuntimeError(f"expected one tree per iteration (binary), got {len(per_iteration)}")
        nodes = per_iteration[0].nodes
        if np.any(nodes["is_categorical"]):
            raise RuntimeError("a tree has a categorical split; the exporter handles numeric splits only")
        roots.append(offset)
        parts.append((nodes, offset))
        offset += nodes.shape[0]

    def cat(name: str) -> np.ndarray:
        return np.concatenate([n[name] for n, _ in parts])

    leaf = cat("is_leaf").astype(bool)
    # Children are per-tree indices in scikit-learn; the kernel wants global ones. Leaves' child
    # fields are meaningless there and set to 0 here so the files are deterministic.
    left = np.concatenate([n["left"].astype(np.int64) + off for n, off in parts])
    right = np.concatenate([n["right"].astype(np.int64) + off for n, off in parts])
    return {
        "baseline": float(baseline[0]),
        "roots": np.array(roots, dtype=np.int64),
        "feature": np.where(leaf, -1, cat("feature_idx").astype(np.int64)),
        "num_threshold": np.where(leaf, 0.0, cat("num_threshold").astype(np.float64)),
        "missing_left": np.where(leaf, False, cat("missing_go_to_left").astype(bool)),
        "left": np.where(leaf, 0, left),
        "right": np.where(leaf, 0, right),
        "is_leaf": leaf,
        "value": np.where(leaf, cat("value").astype(np.float64), 0.0),
    }


def _threshold_for(honest_scores: np.ndarray, target_fpr: float) -> float:
    """The lowest honest score t with #(honest > t) <= floor(target_fpr * n): the honest
    (1 - target_fpr) quantile, taken among the scores so the FPR bound holds exactly."""
    s = np.sort(np.asarray(honest_scores, dtype=np.float64))[::-1]
    allowed = math.floor(target_fpr * s.shape[0] + 1e-9)
    return float(s[min(allowed, s.shape[0] - 1)])


def _thin(n: int, most: int) -> np.ndarray:
    """At most ``most`` indices of 0..n-1, evenly spread, keeping both ends."""
    if n <= most:
        return np.arange(n)
    return np.unique(np.round(np.linspace(0, n - 1, most)).astype(np.int64))


def _rates(scores: np.ndarray, truth: np.ndarray, strata: np.ndarray | None, threshold: float) -> dict[str, Any]:
    from sklearn.metrics import roc_auc_score, roc_curve

    pos = scores > threshold
    t = truth.astype(bool)
    tp, fn = int(np.sum(pos & t)), int(np.sum(~pos & t))
    fp, tn = int(np.sum(pos & ~t)), int(np.sum(~pos & ~t))
    fpr_by_group: dict[str, float] = {}
    tpr_by_group: dict[str, float] = {}
    if strata is not None:
        for label in sorted(set(strata[~t].tolist())):
            rows = ~t & (strata == label)
            fpr_by_group[label] = jeffreys(int(np.sum(pos[rows])), int(np.sum(rows)))
        for label in sorted(set(strata[t].tolist())):
            rows = t & (strata == label)
            tpr_by_group[label] = jeffreys(int(np.sum(pos[rows])), int(np.sum(rows)))
    roc_fpr, roc_tpr, roc_thr = roc_curve(t.astype(np.int64), scores)
    keep = _thin(roc_fpr.shape[0], ROC_POINTS)
    # The full curve's best TPR at FPR <= each reading (the thinned one can step past it).
    tpr_at_fpr = {f"{r:g}": float(roc_tpr[np.searchsorted(roc_fpr, r, side="right") - 1]) for r in ROC_READINGS}
    return {
        "tpr_at_fpr": tpr_at_fpr,
        "tp": tp, "fn": fn, "fp": fp, "tn": tn,
        "tpr": jeffreys(tp, tp + fn), "fpr": jeffreys(fp, fp + tn),
        "fpr_by_group": fpr_by_group, "tpr_by_group": tpr_by_group,
        "auc": float(roc_auc_score(t.astype(np.int64), scores)),
        "roc_fpr": roc_fpr[keep].astype(np.float64), "roc_tpr": roc_tpr[keep].astype(np.float64),
        "roc_threshold": roc_thr[keep].astype(np.float64),
    }


def train(
    x: np.ndarray, y: np.ndarray, seed: int, *, feature_names: tuple[str, ...],
    groups: np.ndarray | None = None, strata: np.ndarray | None = None, target_fpr: float = 0.05,
    holdout: tuple[np.ndarray, np.ndarray, np.ndarray | None] | None = None,
    params: Mapping[str, Any] | None = None,
) -> TrainedModel:
    """Fit the classifier on all of ``x`` and measure its threshold and rates on unseen kills.

    ``y`` is 1 for kills by cheaters, 0 for honest kills; NaN features are missing values. Without
    ``holdout`` the rates, ROC and threshold come from out-of-fold scores (``fold_assignment``:
    by ``groups`` when given, e.g. a match id per kill, else stratified); with ``holdout`` =
    (x, y, strata) of a separate corpus they come from the final model's scores on it. The
    threshold is the honest score quantile giving FPR <= ``target_fpr`` over all honest rows;
    ``strata`` (labels such as "honest:pro" or "smooth_aimbot") split the rates per group.
    ``params`` override ``DEFAULT_PARAMS``. The exported trees are checked against scikit-learn's
    ``decision_function`` before returning.
    """
    import sklearn

    names = tuple(feature_names)
    xs, ys = _check_xy(x, y, len(names), "training set")
    st = _check_strata(strata, ys.shape[0], "training set")
    if not 0.0 < target_fpr < 1.0:
        raise ValueError(f"target_fpr must be in (0, 1), got {target_fpr}")
    if groups is not None and np.asarray(groups).ravel().shape[0] != ys.shape[0]:
        raise ValueError("groups must hold one id per row")

    hx: np.ndarray | None = None
    if holdout is None:
        folds = fold_assignment(ys, groups, seed)
        eval_scores = np.empty(ys.shape[0], dtype=np.float64)
        for k in range(int(folds.max()) + 1):
            test = folds == k
            if np.unique(ys[~test]).shape[0] != 2:
                raise ValueError(f"cross-validation fold {k} leaves one class out of its training rows; "
                                 "give more groups or mix classes across groups")
            fold_clf = _classifier(params, seed).fit(xs[~test], ys[~test])
            eval_scores[test] = fold_clf.decision_function(xs[test])
        eval_y, eval_strata = ys, st
        measured = (f"out-of-fold, GroupKFold({int(folds.max()) + 1}) by group" if groups is not None
                    else "out-of-fold, StratifiedKFold(5)")
        clf = _classifier(params, seed).fit(xs, ys)
    else:
        hx, eval_y = _check_xy(holdout[0], holdout[1], len(names), "holdout")
        eval_strata = _check_strata(holdout[2] if len(holdout) > 2 else None, eval_y.shape[0], "holdout")
        measured = "holdout"
        clf = _classifier(params, seed).fit(xs, ys)
        eval_scores = clf.decision_function(hx)
    trees = _export(clf)
    threshold = _threshold_for(eval_scores[eval_y == 0], target_fpr)
    rates = _rates(eval_scores, eval_y, eval_strata, threshold)
    del rates["tpr_at_fpr"]  # evaluate's reading; the model keeps its whole (thinned) ROC
    model = TrainedModel(
        feature_names=names, threshold=threshold, target_fpr=float(target_fpr), **rates, **trees,
        meta={
            "seed": int(seed), "n_train": int(ys.shape[0]), "n_train_positive": int(ys.sum()),
            "n_eval": int(eval_y.shape[0]), "measured": measured,
            "params": {k: v for k, v in clf.get_params().items() if _json_scalar(v)},
            "n_trees": len(clf._predictors), "sklearn": sklearn.__version__, "numpy": np.__version__,
            "numba": numba.__version__,
        },
    )
    # The compiled walk must be scikit-learn's model exactly, NaN handling included.
    probe = xs if hx is None else np.vstack([xs, hx])
    if not np.allclose(model.score(probe), clf.decision_function(probe), rtol=0.0, atol=1e-9):
        raise RuntimeError("exported trees disagree with scikit-learn's decision_function; the export is wrong")
    log.info("aimdetect model: %d trees; %s: TPR %.3f FPR %.3f (target %.3f) AUC %.3f on %d kills",
             model.n_trees, measured, model.tpr, model.fpr, target_fpr, model.auc, eval_y.shape[0])
    return model


def _json_scalar(v: Any) -> bool:
    return v is None or isinstance(v, (bool, int, float, str))


def evaluate(model: TrainedModel, x: np.ndarray, y: np.ndarray, strata: np.ndarray | None = None) -> dict[str, Any]:
    """Rates of ``model`` on new labelled rows at its own threshold (e.g. a held-out corpus).

    Returns tp, fn, fp, tn, tpr, fpr (Jeffreys-smoothed), fpr_by_group, tpr_by_group, auc,
    roc_fpr, roc_tpr, roc_threshold (thinned to ``ROC_POINTS``), tpr_at_fpr (``{"0.06": TPR}``: the
    ROC's best TPR at FPR <= each of ``ROC_READINGS``, read off the full curve: another operating
    point of the same scores) and n (rows).
    """
    xs, ys = _check_xy(x, y, model.n_features, "evaluation set")
    out = _rates(model.score(xs), ys, _check_strata(strata, ys.shape[0], "evaluation set"), model.threshold)
    out["n"] = int(ys.shape[0])
    return out


# --- persistence ----------------------------------------------------------------------------------


def _npz_path(path: str | Path) -> Path:
    p = Path(path)
    return p if p.suffix == ".npz" else p.with_name(p.name + ".npz")


def save_model(model: TrainedModel, path: str | Path) -> Path:
    """Write ``<stem>.npz`` (suffix added if missing) and its ``<stem>.json`` sidecar; returns the npz path."""
    npz = _npz_path(path)
    npz.parent.mkdir(parents=True, exist_ok=True)
    header_text, npz_bytes = model_parts(model)
    npz.write_bytes(npz_bytes)
    npz.with_suffix(".json").write_text(header_text, encoding="utf-8")
    return npz


def model_parts(model: TrainedModel) -> tuple[str, bytes]:
    """The two files ``save_model`` writes, in memory: (the JSON sidecar's text, the npz's bytes)."""
    buf = io.BytesIO()
    np.savez(buf, **{name: np.asarray(getattr(model, name)) for name in _TREE_ARRAYS})
    header = {
        "format": FORMAT_NAME, "version": FORMAT_VERSION, "feature_names": list(model.feature_names),
        "baseline": model.baseline, "threshold": model.threshold, "target_fpr": model.target_fpr,
        "tp": model.tp, "fn": model.fn, "fp": model.fp, "tn": model.tn, "tpr": model.tpr, "fpr": model.fpr,
        "fpr_by_group": dict(model.fpr_by_group), "tpr_by_group": dict(model.tpr_by_group), "auc": model.auc,
        "roc": {
            "fpr": model.roc_fpr.tolist(), "tpr": model.roc_tpr.tolist(),
            # roc_curve's first threshold is +inf, which strict JSON cannot hold: written as null.
            "threshold": [float(v) if math.isfinite(v) else None for v in model.roc_threshold.tolist()],
        },
        "meta": dict(model.meta),
    }
    # Python's float repr round-trips exactly, so baseline and threshold reload bit for bit.
    return json.dumps(header, indent=2, sort_keys=True, allow_nan=False) + "\n", buf.getvalue()


def load_model(path: str | Path) -> TrainedModel:
    """Read a model written by ``save_model`` (no pickle is ever loaded).

    Raises ModelMissingError when a file is absent, ModelFormatError (a ValueError) when the files
    are of another format version or malformed.
    """
    npz = _npz_path(path)
    sidecar = npz.with_suffix(".json")
    if not npz.is_file() or not sidecar.is_file():
        raise ModelMissingError(f"AimDetect model needs both {npz} and {sidecar}")
    return _from_parts(sidecar.read_text(encoding="utf-8"), npz.read_bytes(), str(npz))


def _from_parts(header_text: str, npz_bytes: bytes, where: str) -> TrainedModel:
    try:
        header = json.loads(header_text)
    except json.JSONDecodeError as exc:
        raise ModelFormatError(f"{where}: the JSON sidecar is not JSON ({exc})") from exc
    version = header.get("version") if isinstance(header, dict) else None
    if version != FORMAT_VERSION or header.get("format") != FORMAT_NAME:
        raise ModelFormatError(
            f"{where}: AimDetect model format version {version!r} ({header.get('format')!r}) is not the "
            f"supported version {FORMAT_VERSION} ({FORMAT_NAME!r}; version 1 was the RBF SVM); "
            "retrain it with `referee lab train-aimdetect`"
        )
    try:
        with np.load(io.BytesIO(npz_bytes), allow_pickle=False) as arrays:
            trees = {name: arrays[name] for name in _TREE_ARRAYS}
        roc = header["roc"]
        return TrainedModel(
            feature_names=tuple(header["feature_names"]), threshold=float(header["threshold"]),
            tpr=float(header["tpr"]), fpr=float(header["fpr"]),
            fpr_by_group=header["fpr_by_group"], tpr_by_group=header["tpr_by_group"],
            tp=int(header["tp"]), fn=int(header["fn"]), fp=int(header["fp"]), tn=int(header["tn"]),
            roc_fpr=np.array(roc["fpr"], dtype=np.float64), roc_tpr=np.array(roc["tpr"], dtype=np.float64),
            roc_threshold=np.array([math.inf if v is None else v for v in roc["threshold"]], dtype=np.float64),
            auc=float(header["auc"]), target_fpr=float(header["target_fpr"]), baseline=float(header["baseline"]),
            meta=header.get("meta", {}), **trees,
        )
    except ModelFormatError as exc:
        raise ModelFormatError(f"{where}: {exc}") from exc
    except (KeyError, TypeError, ValueError) as exc:
        raise ModelFormatError(f"{where}: malformed AimDetect model ({exc!r})") from exc


def load_shipped_model(name: str = SHIPPED_MODEL) -> TrainedModel:
    """The model shipped as package data in ``anticheat/models/``.

    Raises ModelMissingError naming the files when it is not there, ModelFormatError when it is
    of another format version. Reads through ``importlib.resources``, so it also works from a
    zipped install.
    """
    root = importlib.resources.files("anticheat.models")
    npz = root.joinpath(f"{name}.npz")
    sidecar = root.joinpath(f"{name}.json")
    if not npz.is_file() or not sidecar.is_file():
        raise ModelMissingError(
            f"no shipped AimDetect model {name!r}: anticheat/models/{name}.npz and {name}.json are missing; "
            "train one with `referee lab train-aimdetect` and save it there with save_model()"
        )
    return _from_parts(sidecar.read_text(encoding="utf-8"), npz.read_bytes(), f"anticheat.models/{name}")
