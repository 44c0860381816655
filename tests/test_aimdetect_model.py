"""AimDetect's per-kill model: exported trees, out-of-fold threshold and rates, group CV, persistence."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from sklearn.ensemble import HistGradientBoostingClassifier

from anticheat.detectors.aimdetect.model import (
    DEFAULT_PARAMS,
    FORMAT_VERSION,
    ModelFormatError,
    ModelMissingError,
    TrainedModel,
    evaluate,
    fold_assignment,
    jeffreys,
    load_model,
    load_shipped_model,
    reference_scores,
    save_model,
    train,
)

NAMES = tuple(f"f{i}" for i in range(6))
FAST = {"max_iter": 20}


def two_classes(rng: np.random.Generator, n: int, *, nan_share: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """n honest rows around 0 and n cheater rows around 1 on 6 axes; some features missing."""
    x = np.vstack([rng.normal(0.0, 1.0, (n, 6)), rng.normal(1.0, 1.0, (n, 6))])
    # Column 0 is missing more often for cheaters, so the trees learn a side for NaN.
    x[:, 0] = np.where(rng.random(2 * n) < np.r_[np.full(n, 0.05), np.full(n, 0.4)], np.nan, x[:, 0])
    if nan_share:
        x[:, 1:][rng.random((2 * n, 5)) < nan_share] = np.nan
    return x, np.r_[np.zeros(n), np.ones(n)]


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray]:
    return two_classes(np.random.default_rng(7), 300)


@pytest.fixture(scope="module")
def model(data: tuple[np.ndarray, np.ndarray]) -> TrainedModel:
    x, y = data
    return train(x, y, 3, feature_names=NAMES, params=FAST)


# --- the exported trees ------------------------------------------------------------------------


def test_compiled_walk_equals_reference_and_sklearn(model: TrainedModel, data: tuple[np.ndarray, np.ndarray]) -> None:
    x, y = data
    # The final model is fitted on all rows with the defaults plus the override and the seed.
    clf = HistGradientBoostingClassifier(**{**DEFAULT_PARAMS, **FAST}, random_state=3, categorical_features=None)
    clf.fit(x, y)
    rng = np.random.default_rng(11)
    probe = rng.normal(0.5, 1.5, (300, 6))
    probe[rng.random(probe.shape) < 0.25] = np.nan  # NaN in every column, also ones never missing in training
    probe[0] = np.nan
    theirs = clf.decision_function(probe)
    ours = model.score(probe)
    assert np.abs(ours - theirs).max() <= 1e-9
    assert np.abs(reference_scores(model, probe) - ours).max() <= 1e-9
    assert model.n_trees == 20 and model.baseline == pytest.approx(float(clf._baseline_prediction.ravel()[0]))
    # Both NaN directions occur, so NaN handling is really exercised.
    splits = ~model.is_leaf
    assert model.missing_left[splits].any() and not model.missing_left[splits].all()


def test_score_shapes_and_predict(model: TrainedModel, data: tuple[np.ndarray, np.ndarray]) -> None:
    x, _ = data
    one = model.score(x[5])
    assert one.shape == (1,) and one[0] == model.score(x[:10])[5]
    assert np.array_equal(model.predict(x), model.score(x) > model.threshold)
    with pytest.raises(ValueError, match="expected 6 features"):
        model.score(np.zeros(5))
    with pytest.raises(ValueError):
        model.value[0] = 1.0  # the model is immutable, arrays included


# --- threshold, rates and cross-validation -------------------------------------------------------


def test_threshold_keeps_out_of_fold_fpr_under_target(data: tuple[np.ndarray, np.ndarray]) -> None:
    x, y = data
    groups = np.arange(y.shape[0]) % 12
    strata = np.where(y == 0, np.where(np.arange(y.shape[0]) % 2 == 0, "honest:pro", "honest:casual"), "smooth")
    m = train(x, y, 5, feature_names=NAMES, groups=groups, strata=strata, target_fpr=0.1, params=FAST)
    # Recompute the out-of-fold scores by hand from the documented folds.
    folds = fold_assignment(y, groups, 5)
    oof = np.empty(y.shape[0])
    for k in range(5):
        test = folds == k
        clf = HistGradientBoostingClassifier(**{**DEFAULT_PARAMS, **FAST}, random_state=5, categorical_features=None)
        oof[test] = clf.fit(x[~test], y[~test]).decision_function(x[test])
    honest = oof[y == 0]
    allowed = math.floor(0.1 * honest.size)  # 30 of 300
    assert np.sum(honest > m.threshold) <= allowed < np.sum(honest >= m.threshold)  # the lowest such threshold
    assert m.threshold in honest
    pos = oof > m.threshold
    assert (m.tp, m.fn, m.fp, m.tn) == (int(np.sum(pos & (y == 1))), int(np.sum(~pos & (y == 1))),
                                        int(np.sum(pos & (y == 0))), int(np.sum(~pos & (y == 0))))
    assert m.fp / (m.fp + m.tn) <= 0.1
    assert m.tpr == jeffreys(m.tp, m.tp + m.fn) and m.fpr == jeffreys(m.fp, m.fp + m.tn)
    pro = (y == 0) & (strata == "honest:pro")
    assert m.fpr_by_group["honest:pro"] == jeffreys(int(np.sum(pos & pro)), int(np.sum(pro)))
    assert set(m.fpr_by_group) == {"honest:pro", "honest:casual"} and set(m.tpr_by_group) == {"smooth"}
    assert m.tpr_by_group["smooth"] == m.tpr and m.fpr_worst == max(m.fpr_by_group.values())
    assert m.meta["measured"] == "out-of-fold, GroupKFold(5) by group" and m.meta["n_train"] == 600
    # The ROC is the out-of-fold one: its AUC is far from chance and well below a training-set fit's.
    assert 0.85 < m.auc < 0.99 and m.roc_threshold[0] == math.inf and m.roc_fpr.size <= 200


def test_fold_assignment_keeps_groups_whole() -> None:
    y = np.r_[np.zeros(30), np.ones(30)]
    groups = np.repeat(np.arange(3), 20)  # 3 matches -> 3 folds
    folds = fold_assignment(y, groups, 0)
    assert sorted(set(folds.tolist())) == [0, 1, 2]
    for g in range(3):
        assert len(set(folds[groups == g].tolist())) == 1
    many = np.arange(60) % 17
    folds = fold_assignment(y, many, 0)
    assert sorted(set(folds.tolist())) == [0, 1, 2, 3, 4]
    assert all(len(set(folds[many == g].tolist())) == 1 for g in range(17))
    plain = fold_assignment(y, None, 0)  # stratified: 6 honest and 6 cheater rows per fold
    assert all(np.sum((plain == k) & (y == 1)) == 6 for k in range(5))


def test_group_cv_does_not_leak_a_match_identity() -> None:
    # Each match's kills carry the match id as a feature and share one random label; nothing else
    # separates the classes. Scored by a model that saw its match, a kill is trivially classified;
    # by one that did not, only chance remains.
    rng = np.random.default_rng(3)
    n_groups, per = 40, 15
    groups = np.repeat(np.arange(n_groups), per)
    label_of = rng.permutation(np.r_[np.zeros(n_groups // 2), np.ones(n_groups // 2)])
    y = label_of[groups]
    x = np.column_stack([groups.astype(float), rng.normal(size=groups.size)])
    params = {"max_iter": 15, "min_samples_leaf": 5}
    by_group = train(x, y, 1, feature_names=("match", "noise"), groups=groups, params=params)
    leaky = train(x, y, 1, feature_names=("match", "noise"), params=params)
    assert leaky.auc > 0.95
    assert by_group.auc < 0.75


def test_holdout_measures_the_final_model(data: tuple[np.ndarray, np.ndarray]) -> None:
    x, y = data
    hx, hy = two_classes(np.random.default_rng(99), 100, nan_share=0.1)
    hs = np.where(hy == 0, "honest", np.where(np.arange(hy.size) % 2 == 0, "snap", "smooth"))
    m = train(x, y, 3, feature_names=NAMES, holdout=(hx, hy, hs), target_fpr=0.05, params=FAST)
    scores = m.score(hx)
    honest = scores[hy == 0]
    assert np.sum(honest > m.threshold) <= 5 < np.sum(honest >= m.threshold)
    assert m.fp <= 5 and m.fp + m.tn == 100 and m.tp + m.fn == 100 and m.meta["measured"] == "holdout"
    # The final model is the one fitted on all training rows (same scores as the default run).
    again = train(x, y, 3, feature_names=NAMES, params=FAST)
    assert np.array_equal(again.score(hx), scores)
    out = evaluate(m, hx, hy, hs)
    assert (out["tp"], out["fn"], out["fp"], out["tn"]) == (m.tp, m.fn, m.fp, m.tn)
    assert out["tpr_by_group"] == dict(m.tpr_by_group) and set(out["tpr_by_group"]) == {"snap", "smooth"}
    assert out["auc"] == m.auc and out["n"] == 200 and np.array_equal(out["roc_tpr"], m.roc_tpr)
    # The ROC read at other operating points, by hand: the best TPR with at most k honest rows above.
    cheats = np.sort(scores[hy == 1])
    for rate in ("0.01", "0.05", "0.1"):
        k = int(float(rate) * 100 + 1e-9)
        cut = np.sort(honest)[::-1][k]  # the (k+1)-th highest honest score: positives must beat it
        assert out["tpr_at_fpr"][rate] == pytest.approx(np.mean(cheats > cut))


def test_jeffreys_smoothing_by_hand() -> None:
    assert jeffreys(0, 0) == 0.5
    assert jeffreys(0, 9) == 0.05
    assert jeffreys(9, 9) == 0.95
    assert jeffreys(3, 19) == 3.5 / 20
    # Perfectly separated classes: no held-out rate is 0 or 1, per group as well.
    x = np.r_[np.zeros(40), np.ones(40)][:, None] + np.linspace(0, 0.1, 80)[:, None]
    y = np.r_[np.zeros(40), np.ones(40)]
    hx = np.r_[np.zeros(5), np.ones(4)][:, None]
    hy = np.r_[np.zeros(5), np.ones(4)]
    hs = np.array(["honest:a"] * 2 + ["honest:b"] * 3 + ["aim"] * 4)
    m = train(x, y, 0, feature_names=("v",), holdout=(hx, hy, hs), params={"max_iter": 10, "min_samples_leaf": 5})
    assert (m.tp, m.fn, m.fp, m.tn) == (4, 0, 0, 5)
    assert m.tpr == 4.5 / 5 and m.fpr == 0.5 / 6
    assert dict(m.fpr_by_group) == {"honest:a": 0.5 / 3, "honest:b": 0.5 / 4} and m.fpr_worst == 0.5 / 3
    assert dict(m.tpr_by_group) == {"aim": 4.5 / 5} and m.auc == 1.0


def test_training_rejects_bad_input() -> None:
    x = np.zeros((10, 2))
    with pytest.raises(ValueError, match="both 0"):
        train(x, np.zeros(10), 0, feature_names=("a", "b"))
    y = np.r_[np.zeros(5), np.ones(5)]
    with pytest.raises(ValueError, match="expected 3 feature columns, got 2"):
        train(x, y, 0, feature_names=("a", "b", "c"))
    x[0, 0] = np.inf
    with pytest.raises(ValueError, match="inf"):
        train(x, y, 0, feature_names=("a", "b"))
    x[0, 0] = 0.0
    with pytest.raises(ValueError, match="target_fpr"):
        train(x, y, 0, feature_names=("a", "b"), target_fpr=0.0)
    with pytest.raises(ValueError, match="categorical"):
        train(x, y, 0, feature_names=("a", "b"), params={"categorical_features": [0]})
    with pytest.raises(ValueError, match="one class out"):  # a group holding all cheaters
        train(x, y, 0, feature_names=("a", "b"), groups=y.astype(int))


# --- persistence -------------------------------------------------------------------------------


def test_save_load_round_trip_needs_no_pickle(model: TrainedModel, tmp_path: Path) -> None:
    path = save_model(model, tmp_path / "m")
    assert path.name == "m.npz" and (tmp_path / "m.json").is_file()
    with np.load(path, allow_pickle=False) as arrays:
        assert set(arrays.files) == {"roots", "feature", "num_threshold", "missing_left", "left", "right",
                                     "is_leaf", "value"}
    text = (tmp_path / "m.json").read_text()
    header = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))
    assert header["version"] == FORMAT_VERSION == 2 and header["meta"]["sklearn"]
    loaded = load_model(path)
    probe = two_classes(np.random.default_rng(5), 50, nan_share=0.2)[0]
    assert np.array_equal(loaded.score(probe), model.score(probe))
    for name in ("feature_names", "threshold", "tpr", "fpr", "tp", "fn", "fp", "tn", "auc", "target_fpr",
                 "baseline"):
        assert getattr(loaded, name) == getattr(model, name), name
    assert dict(loaded.fpr_by_group) == dict(model.fpr_by_group) and dict(loaded.meta) == dict(model.meta)
    for name in ("roc_fpr", "roc_tpr", "roc_threshold"):
        assert np.array_equal(getattr(loaded, name), getattr(model, name)), name
    with pytest.raises(ModelMissingError):
        load_model(tmp_path / "absent.npz")


def test_a_pickled_model_travels_as_its_files(model: TrainedModel, tmp_path: Path) -> None:
    import pickle

    from anticheat.detectors.aimdetect.model import model_parts

    copy = pickle.loads(pickle.dumps(model))
    probe = two_classes(np.random.default_rng(6), 50, nan_share=0.2)[0]
    assert np.array_equal(copy.score(probe), model.score(probe)) and copy.threshold == model.threshold
    assert model_parts(copy) == model_parts(model)
    # A copy in a worker does not change when the files it came from are rewritten.
    save_model(model, tmp_path / "m")
    held = pickle.loads(pickle.dumps(load_model(tmp_path / "m")))
    (tmp_path / "m.json").write_text("{}")
    assert np.array_equal(held.score(probe), model.score(probe))


def test_version_1_files_are_refused_with_the_way_out(tmp_path: Path) -> None:
    np.savez(tmp_path / "old.npz", scaler_mean=np.zeros(8), scaler_scale=np.ones(8),
             support_vectors=np.zeros((2, 8)), dual_coef=np.zeros(2))
    (tmp_path / "old.json").write_text(json.dumps(
        {"format": "referee-aimdetect-svm", "version": 1, "kernel": "rbf", "feature_names": list("abcdefgh")}))
    with pytest.raises(ValueError, match=r"version 1 .*referee lab train-aimdetect") as info:
        load_model(tmp_path / "old.npz")
    assert isinstance(info.value, ModelFormatError)


def test_malformed_trees_are_refused(model: TrainedModel, tmp_path: Path) -> None:
    path = save_model(model, tmp_path / "m")
    with np.load(path, allow_pickle=False) as arrays:
        trees = {k: arrays[k].copy() for k in arrays.files}
    split = int(np.flatnonzero(~trees["is_leaf"])[1])
    trees["left"][split] = 0  # a child before its parent: the walk could loop forever
    np.savez(path, **trees)
    with pytest.raises(ModelFormatError, match="outside its tree"):
        load_model(path)


def test_missing_shipped_model_is_a_clear_error() -> None:
    with pytest.raises(ModelMissingError, match=r"anticheat/models/no-such-model\.npz"):
        load_shipped_model("no-such-model")
