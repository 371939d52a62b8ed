import pytest
import torch

from crnn.model import CRNN, build_model


def test_classic_crnn_has_the_published_size():
    n = sum(p.numel() for p in CRNN(37).parameters())
    assert 8.2e6 < n < 8.4e6


@pytest.mark.parametrize("arch", ["crnn", "vgg", "crnn_s8", "crnn_s4"])
@pytest.mark.parametrize("width", [16, 32, 100, 128, 400])
def test_output_is_batch_first_for_any_width(arch, width):
    m = CRNN(11, channels=[4, 8, 8, 8, 16, 16, 16], hidden=8, arch=arch).eval()
    y = m(torch.randn(3, 1, 32, width))
    assert y.shape == (3, m.output_length(width), 11)
    assert m.output_length(torch.tensor([width])).item() == y.shape[1]


def test_taller_inputs_and_rgb():
    m = CRNN(5, in_channels=3, channels=[4, 8, 8, 8, 16, 16, 16], hidden=8).eval()
    assert m(torch.randn(2, 3, 64, 100)).shape == (2, m.output_length(100), 5)


def test_dataparallel_contract_batch_equals_concatenated_chunks():
    """DataParallel scatters the batch along dim 0 and concatenates the replica
    outputs along dim 0: that equals the whole batch only for a batch-first output."""
    torch.manual_seed(0)
    m = CRNN(37, channels=[8, 16, 16, 32, 32, 32, 32], hidden=16).eval()
    x = torch.randn(6, 1, 32, 64)
    whole = m(x)
    chunks = torch.cat([m(c) for c in x.chunk(2, dim=0)], dim=0)
    torch.testing.assert_close(chunks, whole, rtol=1e-5, atol=1e-5)
    # A time-first output would have come back as (2T, B/2, C):
    t_first = torch.cat([m(c).transpose(0, 1) for c in x.chunk(2, dim=0)], dim=0)
    assert t_first.shape == (2 * whole.shape[1], 3, 37)


def test_activation_checkpointing_gives_the_same_gradients_and_bn_statistics():
    torch.manual_seed(0)
    a = CRNN(9, channels=[8, 16, 16, 32, 32, 32, 32], hidden=8)
    b = CRNN(9, channels=[8, 16, 16, 32, 32, 32, 32], hidden=8)
    b.load_state_dict(a.state_dict())
    b.grad_checkpoint = True
    x = torch.randn(4, 1, 32, 48)
    for m in (a, b):
        m.train()
        m(x).square().mean().backward()
    for (name, pa), pb in zip(a.named_parameters(), b.parameters()):
        torch.testing.assert_close(pa.grad, pb.grad, rtol=1e-5, atol=1e-6, msg=name)
    for (name, ba), bb in zip(a.named_buffers(), b.buffers()):
        torch.testing.assert_close(ba, bb, msg=name)  # running stats updated once, not twice


def test_crnn_s4_takes_crnn_s8_weights_and_steps_every_4_px():
    """crnn_s4 is crnn_s8's network with a time step every 4 px, as in crnn: the same
    weights load as they are (a crnn_s8 checkpoint fine-tunes into it), and a 32 x 256
    line gives 65 steps where crnn_s8 gives 32."""
    s8 = CRNN(30, channels=[4, 8, 8, 8, 16, 16, 16], hidden=8, arch="crnn_s8").eval()
    s4 = CRNN(30, channels=[4, 8, 8, 8, 16, 16, 16], hidden=8, arch="crnn_s4").eval()
    s4.load_state_dict(s8.state_dict())  # strict: the same keys and shapes
    assert s4.skip is not None
    assert (s8.output_length(256), s4.output_length(256)) == (32, 65)
    assert s4.output_length(256) == CRNN(30, arch="crnn").output_length(256)
    assert s4(torch.randn(1, 1, 32, 256)).shape == (1, 65, 30)


def test_build_from_hparams_round_trips():
    m = CRNN(20, channels=[4, 8, 8, 8, 16, 16, 16], hidden=8, arch="vgg")
    m2 = build_model(m.hparams, m.hparams["num_classes"], m.hparams["in_channels"])
    m2.load_state_dict(m.state_dict())
    assert m2.hparams == m.hparams


def test_min_width_for_steps():
    m = CRNN(5)
    for steps in (1, 5, 26, 40):
        w = m.min_width_for(steps, multiple=4)
        assert m.output_length(w) >= steps
        assert w == 4 or m.output_length(w - 4) < steps


def test_unknown_arch_is_rejected():
    with pytest.raises(ValueError, match="unknown arch"):
        CRNN(5, arch="resnet")


def test_the_lstms_run_in_float32_under_bf16_autocast():
    """CUDA autocast would hand cuDNN's LSTM fp16 whatever the autocast dtype (and bf16
    training has no GradScaler): the recurrent part must see float32. Checked under CPU
    autocast, where the convolutions do run in bf16."""
    m = CRNN(11, channels=[8, 16, 16, 32, 32, 32, 32], hidden=16)
    seen = []
    for block in m.rnn:
        block.lstm.register_forward_pre_hook(lambda mod, args: seen.append(args[0].dtype))
        block.lstm.register_forward_hook(lambda mod, args, out: seen.append(out[0].dtype))
    conv_out = []
    m.cnn.conv0.register_forward_hook(lambda mod, args, out: conv_out.append(out.dtype))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = m(torch.randn(2, 1, 32, 64))
    assert conv_out == [torch.bfloat16]  # autocast is on for the CNN...
    assert seen == [torch.float32] * 4  # ...and off for both LSTMs, in and out
    assert y.shape == (2, m.output_length(64), 11)


def test_compile_with_activation_checkpointing_gives_the_eager_gradients():
    """Dynamo must accept the checkpointed segments (their context_fn was a lambda made
    in the traced frame, which it rejects)."""
    torch.manual_seed(0)
    m = CRNN(11, channels=[8, 16, 16, 32, 32, 32, 32], hidden=16).train()
    m.grad_checkpoint = True
    x = torch.randn(2, 1, 32, 48)

    def grads(model):
        model.zero_grad(set_to_none=True)
        model(x).float().pow(2).mean().backward()
        return {n: p.grad.clone() for n, p in m.named_parameters()}

    state = {k: v.clone() for k, v in m.state_dict().items()}
    eager = grads(m)
    m.load_state_dict(state)  # BatchNorm statistics as before the eager step
    compiled = torch.compile(m, backend="aot_eager", fullgraph=False)
    got = grads(compiled)
    for n in eager:
        torch.testing.assert_close(got[n], eager[n], rtol=1e-4, atol=1e-5)
