"""Darknet activations (reference §2.2), as one small module that applies the named function."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def _hard_mish(x):
    return torch.where(x > 0, x, torch.where(x > -2, x * x / 2 + x, torch.zeros_like(x)))


def _selu(x):
    return torch.where(x >= 0, 1.0507 * x, 1.0507 * 1.6732 * torch.expm1(x))


def _gelu(x):
    return 0.5 * x * (1 + torch.tanh(0.797885 * x + 0.035677 * x * x * x))


def _lhtan(x):
    return torch.where(x < 0, 0.001 * x, torch.where(x > 1, 0.001 * (x - 1) + 1, x))


def _plse(x):
    return torch.where(x < -4, 0.01 * (x + 4), torch.where(x > 4, 0.01 * (x - 4) + 1, 0.125 * x + 0.5))


def _stair(x):
    n = torch.floor(x)
    half = torch.floor(x / 2)
    return torch.where(torch.remainder(n, 2) == 0, half, (x - n) + half)


def _normalize_channels(x):
    positive = x.clamp(min=0)
    return positive / (0.0001 + positive.sum(1, keepdim=True))


def _normalize_channels_softmax(x):
    e = torch.exp(x)
    return e / (0.0001 + e.sum(1, keepdim=True))


def _normalize_channels_softmax_maxval(x):
    e = torch.exp(x - x.amax(1, keepdim=True))
    return e / (0.0001 + e.sum(1, keepdim=True))


ACTIVATIONS = {
    "linear": lambda x: x,
    "logistic": torch.sigmoid,
    "leaky": lambda x: F.leaky_relu(x, 0.1),
    "revleaky": lambda x: F.leaky_relu(x, 0.1),  # same as leaky in the forward pass
    "relu": F.relu,
    "relu6": F.relu6,  # Darknet's GPU semantics; its CPU path returns 0 (a bug)
    "mish": F.mish,
    "swish": F.silu,
    "hard_mish": _hard_mish,
    "elu": F.elu,
    "selu": _selu,
    "gelu": _gelu,
    "relie": lambda x: F.leaky_relu(x, 0.01),
    "ramp": lambda x: x * (x > 0) + 0.1 * x,
    "tanh": torch.tanh,
    "loggy": lambda x: 2 * torch.sigmoid(x) - 1,
    "hardtan": lambda x: x.clamp(-1, 1),
    "lhtan": _lhtan,
    "plse": _plse,
    "stair": _stair,
    "normalize_channels": _normalize_channels,
    "normalize_channels_softmax": _normalize_channels_softmax,
    "normalize_channels_softmax_maxval": _normalize_channels_softmax_maxval,
}


class Activation(nn.Module):
    """Applies the Darknet activation `name`; `linear` is the identity."""

    def __init__(self, name: str):
        super().__init__()
        if name not in ACTIVATIONS:
            raise ValueError(f"unknown activation '{name}'; known: {', '.join(ACTIVATIONS)}")
        self.name = name
        self.fn = ACTIVATIONS[name]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(x)

    def extra_repr(self) -> str:
        return self.name


def read_activation(section, default: str) -> Activation:
    """The section's `activation` key as a module; an unknown name is a cfg error (Darknet would use relu)."""
    name = section.get_str("activation", default)
    if name not in ACTIVATIONS:
        from .cfg import shown  # the cfg's lexer: a long value is named, not echoed

        raise section.error(f"unknown activation '{shown(name)}'; known: {', '.join(ACTIVATIONS)}", "activation")
    return Activation(name)
