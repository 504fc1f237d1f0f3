"""The largest batch per worker whose simulated peak memory fits the worker's slot.

A user asking "does it fit?" next asks "what does?". The memory simulator traces a step on the
meta device in about half a second whatever the batch, and a step's peak grows almost linearly
with the batch (activations), so the answer is found in a few traces: a secant step on the
line through the last two points, kept inside the bracket of a batch that fits and one that
does not, then bisection; every batch reported was simulated, never extrapolated.
"""
from __future__ import annotations

from typing import Callable, Optional

from driple.errors import DripleError

MAX_BATCH = 10_000_000  # beyond this, memory does not limit the batch
MAX_TRACES = 40


def largest_batch(peak_mb: Callable[[int], float], capacity_mb: float, start: int = 1,
                  max_batch: int = MAX_BATCH, max_traces: int = MAX_TRACES) -> dict:
    """``{"batch": b, "peak_mb": peak_mb(b), "traces": n}`` for the largest ``b`` with
    ``peak_mb(b) <= capacity_mb``; ``batch`` 0 when even 1 does not fit, ``max_batch`` (with
    ``"unbounded": True``) when that one still fits. ``peak_mb`` must grow with the batch."""
    if not capacity_mb or capacity_mb <= 0:
        raise DripleError("the worker's memory is unknown: no largest batch to search for")
    seen: dict[int, float] = {}

    def peak(b: int) -> float:
        if b not in seen:
            if len(seen) >= max_traces:
                raise DripleError(f"no answer within {max_traces} simulations")
            seen[b] = float(peak_mb(b))
        return seen[b]

    fits, over = 0, None  # largest batch known to fit, smallest known not to
    b, secant = max(1, int(start)), True
    while True:
        if peak(b) <= capacity_mb:
            fits = b
        else:
            over = b
        if over is not None and over - fits <= 1:
            break
        if over is None and fits >= max_batch:
            return {"batch": max_batch, "peak_mb": seen[max_batch], "traces": len(seen), "unbounded": True}
        b = _grow(seen, capacity_mb, fits, max_batch) if over is None else \
            _inside(seen, capacity_mb, fits, over, secant)
        secant = not secant  # once bracketed: a secant step, then a halving, in turn
    result = {"batch": fits, "peak_mb": seen.get(fits), "traces": len(seen)}
    result["next_peak_mb"] = seen[over]
    return result


def _line(seen: dict, a: int, b: int, capacity: float) -> Optional[int]:
    """Where the line through the simulated points ``a`` and ``b`` reaches ``capacity``."""
    pa, pb = seen[a], seen[b]
    if a == b or pb <= pa:
        return None
    return int(a + (capacity - pa) * (b - a) / (pb - pa))


def _grow(seen: dict, capacity: float, fits: int, max_batch: int) -> int:
    """Every batch so far fits: jump to where the line through the last two reaches the
    capacity (at most 64x further: a first line can be far off), else double."""
    points = sorted(seen)
    guess = _line(seen, points[-2], points[-1], capacity) if len(points) >= 2 else None
    guess = fits * 2 if guess is None else guess
    return max(fits + 1, min(guess, fits * 64, max_batch))


def _inside(seen: dict, capacity: float, fits: int, over: int, secant: bool) -> int:
    """A batch strictly inside the bracket (none there was simulated: the peak grows)."""
    guess = _line(seen, fits, over, capacity) if secant and fits else None
    if guess is None or not fits < guess < over:
        guess = (fits + over) // 2
    return guess
