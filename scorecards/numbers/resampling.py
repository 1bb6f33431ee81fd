"""The random draws behind the intervals and the permutation test: seeded, vectorised, and
cheap when values repeat.

A sample is seen as its distinct values and how often each occurs. Resampling n cases with
replacement is then drawing how many of the n draws land on each value (a multinomial), and
flipping the signs of m differences at random is drawing how many copies of each magnitude come
up positive (a binomial per magnitude): the same distributions, drawn value by value instead of
case by case. Pass fractions over five repeats take six values and their differences eleven,
so 2,000 resamples of 10,000 cases cost 2,000 x 11 draws instead of 20 million. Samples whose
values are mostly distinct (scores) are drawn case by case: in chunks of index matrices, and
of random bytes that each flip eight signs through a table of the eight values' 256 sums.

Every draw starts from a generator seeded afresh and from the values in sorted order, so the
same sample gives the same numbers whatever order its cases came in.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

Floats = NDArray[np.float64]

# Cells of an index or sign matrix held at once: tens of megabytes, not gigabytes.
_CHUNK_CELLS = 2_000_000
# Draw by value only when values repeat enough to pay for it: one multinomial category costs
# about as much as 25 index draws, one binomial about as much as 50 flips through the byte
# table (numpy 2.4, measured on 10,000 values).
_GROUP_RESAMPLES = 32
_GROUP_FLIPS = 64
# Each byte of a sign draw flips eight differences at once, through a table of their 256 sums.
_BYTE_SIGNS = ((np.arange(256)[:, None] >> np.arange(8)) & 1) * 2.0 - 1.0


def _levels(values: Floats, repeats: int) -> tuple[Floats, NDArray[np.int64], bool]:
    """The distinct values, their counts, and whether each value repeats `repeats` times on
    average (drawing by value is then the cheaper way)."""
    levels, counts = np.unique(values, return_counts=True)
    return levels, counts, len(levels) * repeats <= len(values)


def _chunks(total: int, width: int) -> list[tuple[int, int]]:
    rows = max(1, _CHUNK_CELLS // max(1, width))
    return [(start, min(total, start + rows)) for start in range(0, total, rows)]


def resampled_means(values: Floats, *, resamples: int, seed: int) -> Floats:
    """The mean of each of `resamples` bootstrap resamples of the values (n draws each, with
    replacement)."""
    rng = np.random.default_rng(seed)
    n = len(values)
    levels, counts, grouped = _levels(values, _GROUP_RESAMPLES)
    if grouped:
        draws = rng.multinomial(n, counts / n, size=resamples)
        return np.asarray(draws @ levels / n, dtype=np.float64)
    ordered = np.sort(values)
    means = np.empty(resamples)
    for start, stop in _chunks(resamples, n):
        picks = rng.integers(0, n, size=(stop - start, n))
        means[start:stop] = ordered[picks].mean(axis=1)
    return means


def flipped_sums(magnitudes: Floats, *, draws: int, seed: int) -> Floats:
    """Σ sᵢ·mᵢ for each of `draws` draws of independent fair signs sᵢ: a Monte Carlo sample of
    the sign-flip null distribution of a sum of paired differences."""
    rng = np.random.default_rng(seed)
    levels, counts, grouped = _levels(magnitudes, _GROUP_FLIPS)
    if grouped:
        heads = rng.binomial(counts, 0.5, size=(draws, len(levels)))
        return np.asarray((2 * heads - counts) @ levels, dtype=np.float64)
    return _flipped_by_bytes(np.sort(magnitudes), draws, rng)


def _flipped_by_bytes(magnitudes: Floats, draws: int, rng: np.random.Generator) -> Floats:
    blocks = -(-len(magnitudes) // 8)
    padded = np.zeros(blocks * 8)
    padded[: len(magnitudes)] = magnitudes  # a padding zero sums to zero whatever its sign
    table = (padded.reshape(blocks, 8) @ _BYTE_SIGNS.T).ravel()
    offsets = np.arange(blocks) * 256
    sums = np.empty(draws)
    for start, stop in _chunks(draws, blocks):
        codes = rng.integers(0, 256, size=(stop - start, blocks), dtype=np.uint8)
        sums[start:stop] = table[codes + offsets].sum(axis=1)
    return sums


def all_flipped_sums(magnitudes: Floats) -> Floats:
    """Σ sᵢ·mᵢ for every one of the 2^m sign vectors: the exact sign-flip null distribution."""
    m = len(magnitudes)
    signs = ((np.arange(2**m)[:, None] >> np.arange(m)) & 1) * 2.0 - 1.0
    return np.asarray(signs @ np.sort(magnitudes), dtype=np.float64)
