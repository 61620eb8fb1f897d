"""The comparison's shortcut (`golden._all_close`, issue 35: compare large outputs without isclose's full-size
temporaries) says "all close" only where `torch.isclose` says so everywhere: the verdict and its message are
exactly the slow path's, for any values (NaN, infinities, -0.0, subnormals, huge ones), tolerances and sizes
across chunk boundaries."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings, strategies as st  # noqa: E402

from pypto_build.run import golden  # noqa: E402

SPECIAL = [0.0, -0.0, float("nan"), float("inf"), -float("inf"), 1e-45, 3.4e38, -3.4e38, 1.0, -1.0, 1e-3]
values = st.one_of(st.sampled_from(SPECIAL), st.floats(allow_nan=True, allow_infinity=True, width=32))
tolerances = st.sampled_from([0.0, 1e-5, 1e-3, 0.5, float("inf")])     # golden.py's are checked: never NaN or < 0


def slow(got, want, rtol, atol) -> bool:
    return bool(torch.isclose(got, want, rtol=rtol, atol=atol, equal_nan=False).all())


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(values, values), min_size=1, max_size=40), tolerances, tolerances,
       st.sampled_from([torch.float32, torch.float64]), st.integers(1, 7))
def test_the_shortcut_never_passes_what_isclose_fails(pairs, rtol, atol, dtype, chunk):
    got = torch.tensor([a for a, _ in pairs], dtype=dtype)
    want = torch.tensor([b for _, b in pairs], dtype=dtype)
    original = golden._CHUNK
    golden._CHUNK = chunk                       # chunk boundaries inside the small tensors
    try:
        fast = golden._all_close(got, want, rtol, atol)
        message = golden.mismatch(got, want, rtol, atol)
    finally:
        golden._CHUNK = original
    assert not fast or slow(got, want, rtol, atol)
    assert (message is None) == slow(got, want, rtol, atol)


def test_close_outputs_are_decided_by_the_shortcut_and_far_ones_by_isclose():
    want = torch.randn(3, golden._CHUNK + 5)
    assert golden._all_close(want + 1e-7, want, 1e-3, 1e-3) and golden.mismatch(want + 1e-7, want, 1e-3, 1e-3) is None
    far = want.clone()
    far[2, -1] += 1.0                           # in the last, partial chunk
    assert not golden._all_close(far, want, 1e-3, 1e-3)
    assert golden.mismatch(far, want, 1e-3, 1e-3).startswith(f"1 of {want.numel()} elements differ")
    assert not golden._all_close(want.to(torch.bfloat16), want.to(torch.bfloat16), 1e-3, 1e-3)   # not judged here
