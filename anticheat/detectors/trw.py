"""Threshold Random Walk: Wald's sequential probability ratio test over binary observations.

AimDetect (REFERENCES section 5) classifies every kill as positive (aimbot-like) or negative and
feeds the verdicts to this walk. Under H1 (cheater) a kill is positive with probability
``theta1`` (the classifier's true-positive rate); under H0 (honest) with probability ``theta0``
(its false-positive rate). The walk keeps the log of the likelihood ratio and stops at Wald's
thresholds:

- CHEATER when LR >= A = (1 - beta) / alpha,
- HONEST  when LR <= B = beta / (1 - alpha),

with Wald's notation: ``alpha`` is the tolerated false-positive rate (an honest player declared a
cheater) and ``beta`` the tolerated false-negative rate. Wald showed the realised error rates obey
FP <= alpha / (1 - beta) and FN <= beta / (1 - alpha) whatever the overshoot.

A decision is sticky: once the walk reaches a threshold, further observations are ignored until
``reset()``. What to do next is the caller's policy; AimDetect restarts the walk after HONEST (so a
player who starts cheating later is still caught) and keeps CHEATER until the operator resets the
player.

Expected sample sizes (Wald's approximations, which neglect the overshoot past the threshold and
therefore underestimate the true mean, most when a single step is large compared with ln A):

    E[N | H1] = ((1 - beta) ln A + beta ln B) / E1[z]
    E[N | H0] = (alpha ln A + (1 - alpha) ln B) / E0[z]

where z is one observation's log likelihood ratio and E1, E0 its means under H1 and H0.

Because the two increments are fixed, the exact decision probabilities and mean sample size of a
walk can also be computed (``operating_characteristics``, a dynamic programme over the number of
positives). For AimDetect's measured rates (theta1 = 0.836, theta0 = 0.058) one positive kill moves
ln LR by +2.67 and one negative by -1.75, comparable to ln A = 3.0 ... 6.9, so the overshoot is
large: the exact E[N] exceeds Wald's by 4 % to 76 % (worst at alpha = beta = 0.05, where the exact
E[N | H1] is 2.39 kills against Wald's 1.36). The realised error rates stay inside Wald's bounds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

import numpy as np


class Decision(str, Enum):
    """State of a walk."""

    PENDING = "pending"
    CHEATER = "cheater"
    HONEST = "honest"


@dataclass(frozen=True, slots=True)
class WaldThresholds:
    """Wald's stopping thresholds as likelihood ratios and their natural logs."""

    upper: float
    lower: float
    log_upper: float
    log_lower: float


def wald_thresholds(alpha: float, beta: float) -> WaldThresholds:
    """A = (1 - beta) / alpha and B = beta / (1 - alpha), with their logs.

    Raises ValueError unless 0 < alpha, beta and alpha + beta < 1 (otherwise B >= A and the walk
    could decide both ways at once).
    """
    if not (0.0 < alpha < 1.0 and 0.0 < beta < 1.0 and alpha + beta < 1.0):
        raise ValueError(f"need 0 < alpha, beta and alpha + beta < 1, got alpha={alpha}, beta={beta}")
    upper = (1.0 - beta) / alpha
    lower = beta / (1.0 - alpha)
    return WaldThresholds(upper=upper, lower=lower, log_upper=math.log(upper), log_lower=math.log(lower))


def _check_thetas(theta0: float, theta1: float) -> None:
    if not (0.0 < theta0 < theta1 < 1.0):
        raise ValueError(f"need 0 < theta0 < theta1 < 1, got theta0={theta0}, theta1={theta1}")


def log_steps(theta0: float, theta1: float) -> tuple[float, float]:
    """Log-LR increments (positive observation, negative observation)."""
    _check_thetas(theta0, theta1)
    return math.log(theta1 / theta0), math.log((1.0 - theta1) / (1.0 - theta0))


def expected_step(theta: float, theta0: float, theta1: float) -> float:
    """Mean log-LR increment per observation when observations are Bernoulli(theta)."""
    up, down = log_steps(theta0, theta1)
    return theta * up + (1.0 - theta) * down


def expected_sample_sizes(theta0: float, theta1: float, alpha: float, beta: float) -> tuple[float, float]:
    """Wald's approximate (E[N | H1], E[N | H0]): observations to a decision, overshoot ignored."""
    th = wald_thresholds(alpha, beta)
    e1 = expected_step(theta1, theta0, theta1)
    e0 = expected_step(theta0, theta0, theta1)
    n1 = ((1.0 - beta) * th.log_upper + beta * th.log_lower) / e1
    n0 = (alpha * th.log_upper + (1.0 - alpha) * th.log_lower) / e0
    return n1, n0


@dataclass(frozen=True, slots=True)
class OperatingPoint:
    """Exact behaviour of a walk fed Bernoulli(theta) observations.

    Attributes: p_cheater, p_honest (probabilities of each decision), mean_n (expected
    observations to a decision), unresolved (probability mass still pending when the computation
    stopped; below ``tol`` unless ``max_steps`` was reached).
    """

    p_cheater: float
    p_honest: float
    mean_n: float
    unresolved: float


def operating_characteristics(
    theta: float, theta0: float, theta1: float, alpha: float, beta: float,
    *, tol: float = 1e-12, max_steps: int = 100_000,
) -> OperatingPoint:
    """Exact decision probabilities and E[N] of a walk whose observations are Bernoulli(theta).

    After n observations with p positives, ln LR = p * up + (n - p) * down, so the pending mass is a
    vector over p; each step shifts it and removes what crossed a threshold. Cost O(n^2) in the
    number of steps until the pending mass drops below ``tol`` (a few dozen for AimDetect).
    """
    if not 0.0 <= theta <= 1.0:
        raise ValueError(f"theta must be a probability, got {theta}")
    th = wald_thresholds(alpha, beta)
    up, down = log_steps(theta0, theta1)
    mass = np.ones(1)
    p_cheater = p_honest = mean_n = 0.0
    n = 0
    while mass.sum() > tol and n < max_steps:
        n += 1
        nxt = np.zeros(n + 1)
        nxt[:-1] += mass * (1.0 - theta)
        nxt[1:] += mass * theta
        llr = np.arange(n + 1) * up + (n - np.arange(n + 1)) * down
        hi = llr >= th.log_upper
        lo = llr <= th.log_lower
        p_cheater += float(nxt[hi].sum())
        p_honest += float(nxt[lo].sum())
        mean_n += n * float(nxt[hi | lo].sum())
        nxt[hi | lo] = 0.0
        mass = nxt
    return OperatingPoint(p_cheater=p_cheater, p_honest=p_honest, mean_n=mean_n, unresolved=float(mass.sum()))


class ThresholdRandomWalk:
    """One player's walk. Pure state machine: no clock, no randomness.

    Attributes (read-only by convention): ``log_lr`` (current log likelihood ratio),
    ``observations`` (count since the last reset), ``positives`` (positive count since the last
    reset), ``decision``, ``peak_log_lr`` (the highest ``log_lr`` of any walk since this object
    was made, from 0: ``reset`` keeps it, so a caller that restarts walks still sees how close
    one came to deciding CHEATER, or that one did).
    """

    __slots__ = ("theta0", "theta1", "alpha", "beta", "thresholds", "_up", "_down", "log_lr",
                 "observations", "positives", "decision", "peak_log_lr")

    def __init__(self, theta0: float, theta1: float, alpha: float, beta: float) -> None:
        self.thresholds = wald_thresholds(alpha, beta)
        self._up, self._down = log_steps(theta0, theta1)
        self.theta0 = theta0
        self.theta1 = theta1
        self.alpha = alpha
        self.beta = beta
        self.log_lr = 0.0
        self.observations = 0
        self.positives = 0
        self.decision = Decision.PENDING
        self.peak_log_lr = 0.0

    @property
    def likelihood_ratio(self) -> float:
        """exp(log_lr); may overflow to inf for very long positive streaks, which is harmless."""
        return math.exp(min(self.log_lr, 700.0))

    def observe(self, positive: bool) -> Decision:
        """Add one observation and return the (possibly unchanged, sticky) decision."""
        if self.decision is not Decision.PENDING:
            return self.decision
        self.observations += 1
        if positive:
            self.positives += 1
            self.log_lr += self._up
            # theta1 > theta0 makes the positive step the only rising one.
            if self.log_lr > self.peak_log_lr:
                self.peak_log_lr = self.log_lr
        else:
            self.log_lr += self._down
        # Compare in log space with the thresholds computed once, so the test is exactly Wald's.
        if self.log_lr >= self.thresholds.log_upper:
            self.decision = Decision.CHEATER
        elif self.log_lr <= self.thresholds.log_lower:
            self.decision = Decision.HONEST
        return self.decision

    def reset(self) -> None:
        """Start a fresh walk (LR = 1) with the same parameters."""
        self.log_lr = 0.0
        self.observations = 0
        self.positives = 0
        self.decision = Decision.PENDING
