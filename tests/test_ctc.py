import math

import pytest
import torch

from crnn.ctc import greedy_decode
from crnn.ctc.loss import ctc_loss, ctc_loss_per_sample
from crnn.text.alphabet import Charset


def _logits(frames, k=4, hi=10.0):
    """Hand-made logits: one peaked class per frame."""
    x = torch.zeros(1, len(frames), k)
    for t, c in enumerate(frames):
        x[0, t, c] = hi
    return x


def test_greedy_merges_repeats_and_drops_blanks():
    cs = Charset("abc")
    # a a _ a b b _ _ c  -> "aabc"
    preds = greedy_decode(_logits([1, 1, 0, 1, 2, 2, 0, 0, 3]), cs)
    assert preds[0].text == "aabc"
    assert len(preds[0].char_confidences) == 4
    p = math.exp(10) / (math.exp(10) + 3)
    assert preds[0].confidence == pytest.approx(p**4, rel=1e-5)


def test_greedy_respects_lengths_and_empty_output():
    cs = Charset("abc")
    x = torch.cat([_logits([1, 2, 3]), _logits([0, 0, 0])])
    preds = greedy_decode(x, cs, lengths=torch.tensor([2, 3]))
    assert [p.text for p in preds] == ["ab", ""]
    assert 0 < preds[1].confidence <= 1


def test_char_confidence_is_the_best_frame_of_its_run():
    cs = Charset("ab")
    x = torch.zeros(1, 2, 3)
    x[0, 0, 1] = 1.0
    x[0, 1, 1] = 5.0
    (p,) = greedy_decode(x, cs)
    assert p.text == "a"
    assert p.char_confidences[0] == pytest.approx(torch.softmax(x[0, 1], 0)[1].item())


def test_loss_from_batch_first_logits_matches_time_first_reference():
    torch.manual_seed(0)
    logits = torch.randn(3, 12, 6, requires_grad=True)
    targets = torch.tensor([[1, 2, 0], [3, 3, 4], [5, 0, 0]])
    il, tl = torch.tensor([12, 10, 7]), torch.tensor([2, 3, 1])
    per = ctc_loss_per_sample(logits, targets, il, tl)
    ref = torch.nn.functional.ctc_loss(
        logits.log_softmax(-1).transpose(0, 1),
        targets,
        il,
        tl,
        reduction="none",
        zero_infinity=True,
    )
    torch.testing.assert_close(per, ref)
    assert ctc_loss(logits, targets, il, tl).item() == pytest.approx(per.mean().item())


def test_input_lengths_matter_and_impossible_alignments_are_zeroed():
    torch.manual_seed(0)
    logits = torch.randn(1, 10, 5)
    t = torch.tensor([[1, 2, 3]])
    full = ctc_loss_per_sample(logits, t, torch.tensor([10]), torch.tensor([3]))
    short = ctc_loss_per_sample(logits, t, torch.tensor([5]), torch.tensor([3]))
    assert full.item() != pytest.approx(short.item())
    impossible = ctc_loss_per_sample(
        logits, torch.tensor([[1, 1, 1]]), torch.tensor([4]), torch.tensor([3])
    )
    assert impossible.item() == 0.0  # zero_infinity: 1,_,1,_,1 needs 5 frames


def test_fp16_logits_give_an_fp32_loss():
    logits = torch.randn(2, 8, 5).half()
    loss = ctc_loss_per_sample(
        logits, torch.tensor([[1], [2]]), torch.tensor([8, 8]), torch.tensor([1, 1])
    )
    assert loss.dtype == torch.float32 and torch.isfinite(loss).all()
