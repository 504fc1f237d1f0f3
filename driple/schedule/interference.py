"""How much co-located jobs slow each other down, from their solo profiles: one model for every
policy (only the profiles a policy *judges* by differ; the simulated slow-down always comes from
the measured ones).

Jobs share a worker slot of compute capacity ``C`` (% of a core: 100 for one core). Each job is
its compute square wave (:meth:`ResourceProfile.shape`): burst level ``b_i`` for a share ``d_i``
of its step (the duty cycle), idle otherwise. While job ``i`` is in burst, the others are in
burst independently with probability ``d_j`` (random phases, as in
:func:`driple.predict.colocate.colocate`); a state whose summed demand ``D`` exceeds ``C`` runs
every job in it at ``C / D`` of its speed (fair processor sharing), so ``i``'s burst stretches
by ``E_i = E[max(1, D / C) | i in burst]``. Its step time becomes

    s_i = 1 + (1 + alpha) x d_i x (E_i - 1) + beta x sum_j m_j / C

with ``m_j = b_j d_j`` the neighbours' mean compute load. Stretched bursts occupy more of each
step, so the duty cycles seen by the neighbours are updated to ``d_i E_i / (1 - d_i + d_i E_i)``
and the expectation is iterated to a fixed point (a few rounds). ``alpha`` is the share of
overlap that costs more than fair sharing (context switches, caches, the samplers of the
measured runs); ``beta`` the slow-down a busy neighbour causes without any overload (shared
caches and memory bandwidth). Both are fitted to the measured co-runs
(:func:`fit_interference`, ``driple.evaluation.schedule.check_interference``); memory and the
links do not slow a job down here: memory either fits or the job is out of memory, and the
measured co-runs ran each job on links of its own.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from driple.errors import DripleError

# fitted on the 24 measured co-run pairs (48 slow-downs) of datasets/v2*/corun-*: see
# driple.evaluation.schedule.check_interference, which refits them and reports the error
ALPHA = 0.19
BETA = 0.12
FIXED_POINT_ROUNDS = 20


@dataclass(frozen=True)
class InterferenceModel:
    """Slow-down of co-located jobs (module doc); ``alpha`` and ``beta`` as fitted, ``rounds``
    of the duty-cycle fixed point."""

    alpha: float = ALPHA
    beta: float = BETA
    rounds: int = FIXED_POINT_ROUNDS

    def slowdowns(self, profiles, capacity: float) -> np.ndarray:
        """Step-time factor (>= 1) of each of ``profiles`` sharing ``capacity`` % of compute."""
        b, d = compute_waves(profiles)
        return self.slowdowns_of(b, d, capacity)

    def slowdowns_of(self, burst, duty, capacity: float) -> np.ndarray:
        """As :meth:`slowdowns`, from compute burst levels ``burst`` (%) and duty cycles ``duty``."""
        overlap, neighbours = interference_terms(burst, duty, capacity, self.rounds)
        return 1.0 + (1.0 + self.alpha) * overlap + self.beta * neighbours


def interference_terms(burst, duty, capacity: float, rounds: int = FIXED_POINT_ROUNDS
                       ) -> tuple[np.ndarray, np.ndarray]:
    """The two terms of the slow-down that do not depend on ``alpha`` and ``beta``: the overlap
    term ``d_i (E_i - 1)`` and the neighbours' mean load ``sum_j m_j / C`` of each job."""
    b = np.asarray(burst, dtype=np.float64)
    d0 = np.clip(np.asarray(duty, dtype=np.float64), 0.0, 1.0)
    if capacity <= 0:
        raise DripleError(f"compute capacity must be > 0, got {capacity}")
    n = len(b)
    if n <= 1:
        return np.zeros(n), np.zeros(n)
    d = d0.copy()
    stretch = np.ones(n)
    for _ in range(max(rounds, 1)):
        stretch = expected_stretch(b, d, capacity)
        d_new = d0 * stretch / (1.0 - d0 + d0 * stretch)
        if np.allclose(d_new, d, atol=1e-9):
            break
        d = d_new
    mean = b * d0
    return d0 * (stretch - 1.0), (mean.sum() - mean) / capacity


def compute_waves(profiles) -> tuple[np.ndarray, np.ndarray]:
    """Compute burst level (%) and duty cycle of each profile."""
    shapes = [p.shape("compute") for p in profiles]
    return (np.array([s.burst_amount for s in shapes], dtype=np.float64),
            np.array([s.duty_cycle for s in shapes], dtype=np.float64))


def expected_stretch(burst: np.ndarray, duty: np.ndarray, capacity: float) -> np.ndarray:
    """``E[max(1, D / C) | job i in burst]`` for each job, over the 2^(n-1) states of the others."""
    n = len(burst)
    out = np.ones(n)
    for i in range(n):
        others = [j for j in range(n) if j != i]
        if not others:
            continue
        bits = (np.arange(2 ** len(others))[:, None] >> np.arange(len(others))[None, :]) & 1
        dj, bj = duty[others], burst[others]
        prob = np.prod(np.where(bits == 1, dj, 1.0 - dj), axis=1)
        demand = burst[i] + bits @ bj
        out[i] = float((prob * np.maximum(1.0, demand / capacity)).sum())
    return out


def fit_interference(cases, alphas=None, betas=None) -> InterferenceModel:
    """The ``alpha``, ``beta`` (grid search, steps of 0.01) that minimise the median relative
    error of the slow-downs of ``cases``: ``[(burst levels, duty cycles, capacity, measured
    slow-downs)]``."""
    if not cases:
        raise DripleError("no measured co-run to fit the interference model on")
    alphas = np.round(np.arange(-0.2, 0.8001, 0.01), 2) if alphas is None else np.asarray(alphas)
    betas = np.round(np.arange(0.0, 0.3001, 0.01), 2) if betas is None else np.asarray(betas)
    x, y, m = _stack(cases)
    pred = 1.0 + (1.0 + alphas[:, None, None]) * x + betas[None, :, None] * y  # [alpha, beta, job]
    err = np.median(np.abs(pred / m - 1.0), axis=2)
    i, j = np.unravel_index(np.argmin(err), err.shape)
    return InterferenceModel(alpha=float(alphas[i]), beta=float(betas[j]))


def median_error(model: InterferenceModel, cases) -> float:
    """Median of |predicted / measured - 1| over every job of ``cases``."""
    x, y, m = _stack(cases, model.rounds)
    pred = 1.0 + (1.0 + model.alpha) * x + model.beta * y
    return float(np.median(np.abs(pred / m - 1.0)))


def _stack(cases, rounds: int = FIXED_POINT_ROUNDS):
    xs, ys, ms = [], [], []
    for burst, duty, capacity, measured in cases:
        x, y = interference_terms(burst, duty, capacity, rounds)
        xs.append(x)
        ys.append(y)
        ms.append(np.asarray(measured, dtype=np.float64))
    return np.concatenate(xs), np.concatenate(ys), np.concatenate(ms)
