"""The numbers in one sentence, for the compare page and `submit`'s output:
`pass rate 62 % [48-74] vs 70 % [56-81]; Δ -8 pp [-19, +3], p = 0.18 (McNemar, 40 pairs): no
detectable difference — these pairs detect ≥ 21 pp`, written with a true minus sign and an en
dash between an interval's ends.
"""

from __future__ import annotations

from scorecards.numbers.figures import Estimate, Significance

MINUS = "\u2212"
EN_DASH = "\u2013"
_METHODS = {"mcnemar_exact": "McNemar", "paired_permutation": "paired permutation"}
_VERDICTS = {"worse": "B is worse", "better": "B is better"}
# Below this width (in points) an interval's ends would round together: show a decimal.
_NARROW_PP = 5.0


def _decimals(lo: float, hi: float) -> int:
    return 1 if 0 < hi - lo < _NARROW_PP else 0


def _number(value: float, decimals: int, *, signed: bool = False) -> str:
    text = f"{abs(value):.{decimals}f}"
    if float(text) == 0:
        return text
    if value < 0:
        return MINUS + text
    return "+" + text if signed else text


def estimate_text(estimate: Estimate) -> str:
    """`62 % [48-74]`: a run's figure in percent with its interval."""
    if estimate.value is None:
        return "none settled"
    if estimate.ci is None:
        return f"{_number(estimate.value * 100, 0)} %"
    lo, hi = (bound * 100 for bound in estimate.ci)
    places = _decimals(lo, hi)
    value = _number(estimate.value * 100, places)
    return f"{value} % [{_number(lo, places)}{EN_DASH}{_number(hi, places)}]"


def p_text(p_value: float) -> str:
    """`p = 0.18`, two significant digits; `p < 0.001` below that."""
    return "p < 0.001" if p_value < 0.001 else f"p = {p_value:.2g}"


def significance_text(significance: Significance) -> str:
    """`Δ -8 pp [-19, +3], p = 0.18 (McNemar, 40 pairs): no detectable difference — these
    pairs detect ≥ 21 pp`, or `no paired cases`."""
    s = significance
    if s.pairs == 0 or s.delta_pp is None or s.p_value is None or s.method is None:
        return "no paired cases"
    lo, hi = s.ci_pp or (s.delta_pp, s.delta_pp)
    places = _decimals(lo, hi)
    delta = f"Δ {_number(s.delta_pp, places, signed=True)} pp"
    if s.ci_pp is not None:
        delta += f" [{_number(lo, places, signed=True)}, {_number(hi, places, signed=True)}]"
    pairs = f"{s.pairs} pair" + ("" if s.pairs == 1 else "s")
    return f"{delta}, {p_text(s.p_value)} ({_METHODS[s.method]}, {pairs}): {_verdict(s)}"


def _verdict(s: Significance) -> str:
    if s.verdict in _VERDICTS:
        return _VERDICTS[s.verdict]
    if s.detectable_pp is None:
        return "no detectable difference"
    # Two figures between 0 and 1 cannot differ by more than 100 points.
    if s.detectable_pp >= 100:
        return "no detectable difference — too few pairs to detect any"
    return f"no detectable difference — these pairs detect ≥ {s.detectable_pp:.0f} pp"


def compare_sentence(
    *, a: Estimate, b: Estimate, significance: Significance, figure: str = "pass rate"
) -> str:
    """Run A's figure against run B's, then whether B differs: the sentence a compare leads
    with."""
    return f"{figure} {estimate_text(a)} vs {estimate_text(b)}; {significance_text(significance)}"
