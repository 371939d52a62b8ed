import pytest
import torch

from crnn.text.metrics import TextMetrics, alnum_normalize


def test_metrics_on_hand_made_examples():
    m = TextMetrics()
    m.update(
        ["hello", "wor1d", "", "Cat"],
        ["hello", "world", "abc", "cat"],
        ["hello", "world", "abc", "CAT!"],
    )
    r = m.compute()
    assert r["count"] == 4
    assert r["accuracy"] == pytest.approx(1 / 4)  # "Cat" != "cat" exactly
    assert r["alnum_accuracy"] == pytest.approx(2 / 4)  # hello, CAT! ~ Cat
    assert r["cer"] == pytest.approx((0 + 1 + 3 + 1) / (5 + 5 + 3 + 3))
    assert r["ned"] == pytest.approx((0 + 1 / 5 + 1 + 1 / 3) / 4)


def test_alnum_normalize_is_the_field_convention():
    assert alnum_normalize("Don't-Stop 2!") == "dontstop2"
    # Other scripts keep their letters: "中国" must not become "", equal to any read.
    assert alnum_normalize("中国，2026年！") == "中国2026年"


def test_sums_survive_a_tensor_round_trip_and_pool():
    a, b = TextMetrics(), TextMetrics()
    a.update(["x"], ["x"])
    b.update(["y", "z"], ["y", "q"])
    pooled = TextMetrics.from_tensor(a.to_tensor() + b.to_tensor())
    assert pooled.compute()["accuracy"] == pytest.approx(2 / 3)
    a.add(b)
    assert a.compute() == pooled.compute()
    assert isinstance(a.to_tensor(), torch.Tensor)


def test_length_mismatch_is_an_error():
    with pytest.raises(ValueError, match="2 predictions for 1 labels"):
        TextMetrics().update(["a", "b"], ["a"])
