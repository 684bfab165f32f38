"""How a curve's cost grows: a constant against a straight line, by least squares.

Plain arithmetic, no numpy: the curves have a dozen points. Shared by
``curves.py`` (which measures and prints) and ``plots.py`` (which draws).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

#: A line "explains" a curve when it leaves at most this share of the
#: curve's variance around its mean unexplained ...
MIN_R2 = 0.8
#: ... and it moves by at least this share of its value at the first point
#: across the range measured; otherwise the curve is called constant.
MIN_RISE = 0.05


@dataclass(frozen=True)
class Series:
    """One measured curve: ``ys`` (in ``unit``) against ``xs``."""

    name: str
    xs: list[float]
    ys: list[float]
    unit: str


@dataclass(frozen=True)
class Fit:
    """A curve fitted twice: by a constant (its mean) and by a line."""

    #: The constant model: the mean of the ys.
    mean: float
    #: The linear model: ``intercept + slope * x``.
    intercept: float
    slope: float
    #: The share of the ys' variance around their mean the line explains
    #: (1 - the line's residual sum of squares over the constant's).
    r2: float
    #: The span of x measured.
    x_min: float
    x_max: float

    def at(self, x: float) -> float:
        """The line's value at ``x``."""
        return self.intercept + self.slope * x

    @property
    def rise(self) -> float:
        """How far the line moves across the range measured."""
        return self.slope * (self.x_max - self.x_min)

    @property
    def shape(self) -> str:
        """``grows linearly``, ``falls linearly`` or ``constant``, as the fits say."""
        if self.r2 >= MIN_R2 and abs(self.rise) >= MIN_RISE * abs(self.at(self.x_min)):
            return "grows linearly" if self.slope > 0 else "falls linearly"
        return "constant"


def fit(xs: list[float], ys: list[float]) -> Fit:
    """Least squares of ``ys`` on ``xs`` (at least two distinct xs)."""
    if len(xs) != len(ys) or len(set(xs)) < 2:
        raise ValueError("a fit needs two or more distinct points")
    mx = statistics.fmean(xs)
    my = statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    slope = sxy / sxx
    intercept = my - slope * mx
    total = sum((y - my) ** 2 for y in ys)
    left = sum((y - intercept - slope * x) ** 2 for x, y in zip(xs, ys, strict=True))
    r2 = 1.0 - left / total if total > 0 else 1.0
    return Fit(my, intercept, slope, r2, min(xs), max(xs))
