"""Growing a trained model's BiLSTMs wider without changing what it reads.

``train.init_from`` with a larger ``model.hidden`` than the checkpoint's: every trained
weight keeps its place, the new hidden units start from the model's own random
initialisation, and every weight *from* a new unit *into* a trained one (a gate, the
projection, the classifier) starts at zero. At step 0 the wider network computes exactly
the logits the checkpoint did; the new units' outgoing weights get gradients from the
first step on and the units start to count (Net2Net's widening, Chen, Goodfellow & Shlens
2016, with zero rather than copied outgoing weights).
"""

from __future__ import annotations

import re
from typing import Any

import torch

from crnn.model import CRNN

# nn.LSTM stacks its four gates (input, forget, cell, output) along the rows.
_GATES = 4
_LSTM_KEY = re.compile(r"^rnn\.\d+\.lstm\.(weight|bias)_(ih|hh)_l0(_reverse)?$")
_PROJ_KEY = re.compile(r"^rnn\.\d+\.proj\.weight$")


def checkpoint_hidden(state_dict: dict[str, Any]) -> int | None:
    """The BiLSTM hidden size of a state_dict's weights (None without LSTMs)."""
    w = state_dict.get("rnn.0.lstm.weight_hh_l0")
    return None if w is None else int(w.shape[1])


def _places(kind: str, old: int, new: int) -> torch.Tensor:
    """Where each of a dimension's trained indices sits in the grown one: ``old`` and
    ``new`` are the hidden sizes."""
    if kind == "gates":  # 4 blocks of ``old`` units -> 4 blocks of ``new``
        return torch.cat([torch.arange(old) + k * new for k in range(_GATES)])
    if kind == "both":  # the forward units, then the backward ones
        return torch.cat([torch.arange(old), torch.arange(old) + new])
    return torch.arange(old)  # "units": the first ``old`` of ``new``


def _kinds(key: str, trained: torch.Tensor, fresh: torch.Tensor, old: int, new: int) -> list[str]:
    """How each dimension of a weight grows from hidden size ``old`` to ``new``: gates,
    both directions' units, or plain units; "same" for every other dimension (the conv
    features in, the classes out: another charset's classifier keeps its rows here, and
    :func:`~crnn.checkpoint.foreign.adapt_to_charset` re-orders them afterwards)."""
    kinds = []
    for d, (a, b) in enumerate(zip(trained.shape, fresh.shape)):
        if d == 0 and _LSTM_KEY.match(key) and (a, b) == (_GATES * old, _GATES * new):
            kinds.append("gates")
        elif d == 1 and _PROJ_KEY.match(key) and (a, b) == (2 * old, 2 * new):
            kinds.append("both")  # a projection reads both directions' units
        elif (a, b) == (old, new):
            kinds.append("units")  # a projection's output, or vgg's fc reading it
        else:
            kinds.append("same")
    return kinds


def grow_hidden(state_dict: dict[str, Any], model: CRNN) -> tuple[dict[str, Any], str]:
    """``state_dict``'s BiLSTMs grown to ``model``'s hidden size, and a line that says so.

    Returns the state_dict unchanged (and an empty line) when the hidden sizes already
    agree or it has no LSTMs; raises ValueError when the model is narrower."""
    fresh = model.state_dict()
    old, new = checkpoint_hidden(state_dict), checkpoint_hidden(fresh)
    if old is None or new is None or old == new:
        return state_dict, ""
    if new < old:
        raise ValueError(
            f"model.hidden={new} is narrower than the checkpoint's BiLSTMs ({old}): a model "
            f"can be grown from a checkpoint, not shrunk; set model.hidden={old}"
        )
    grown = dict(state_dict)
    for key, trained in state_dict.items():
        if key not in fresh or trained.shape == fresh[key].shape:
            continue
        kinds = _kinds(key, trained, fresh[key], old, new)
        places = [
            _places(kind, old, new) if kind != "same" else torch.arange(size)
            for kind, size in zip(kinds, trained.shape)
        ]
        # The grown shape; a "same" dimension keeps the trained size.
        shape = [f if k != "same" else t for k, t, f in zip(kinds, trained.shape, fresh[key].shape)]
        out = torch.zeros(shape, dtype=trained.dtype)
        common = tuple(slice(0, min(a, b)) for a, b in zip(shape, fresh[key].shape))
        out[common] = fresh[key][common].detach().to(trained.dtype)
        # A trained unit's row reads nothing from a new unit: zero it, then put back the
        # trained weights. New units' rows keep the model's random initialisation.
        out[places[0]] = 0
        if trained.dim() == 1:
            out[places[0]] = trained
        else:
            out[places[0][:, None], places[1][None, :]] = trained
        grown[key] = out
    note = (
        f"grew the BiLSTMs from {old} to {new} hidden units per direction: the trained "
        f"weights are kept, the new units' weights into them start at zero, so the model "
        f"reads as the checkpoint did at step 0"
    )
    return grown, note
