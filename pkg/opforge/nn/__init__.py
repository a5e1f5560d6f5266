"""opforge.nn: layers with weights, losses, and model files.

    >>> import opforge as of
    >>> model = of.nn.Sequential(of.nn.Linear(64, 32), of.nn.ReLU(), of.nn.Linear(32, 10))
    >>> model.save("mlp.safetensors")          # config in the metadata
    >>> same = of.nn.load_model("mlp.safetensors")

Every layer computes with registered ops (no numpy math), so the gradient
tape records it. safetensors is imported only when a file is written.
"""

from opforge.nn import functional
from opforge.nn.layer import Layer, Module, Parameter, register_layer
from opforge.nn.losses import BCEWithLogitsLoss, CrossEntropyLoss, L1Loss, MSELoss
from opforge.nn.layers import (GELU, Dropout, Embedding, LayerNorm, Linear, ReLU, RMSNorm, Sequential,
                               Softmax)
from opforge.nn.model_file import load_model, read_weights
from opforge.nn.activations import Flatten, Hardsigmoid, Hardswish, LeakyReLU, ReLU6, SiLU, Upsample  # noqa: E402
from opforge.nn.conv import Conv1d, Conv2d, ConvTranspose2d  # noqa: E402
from opforge.nn.norm import BatchNorm2d  # noqa: E402
from opforge.nn.pool import AdaptiveAvgPool2d, AvgPool2d, MaxPool2d  # noqa: E402
from opforge.nn.attention import MultiheadAttention  # noqa: E402

__all__ = ["Layer", "register_layer", "Linear", "Embedding", "RMSNorm", "LayerNorm", "Dropout", "ReLU",
           "GELU", "Softmax", "Sequential", "functional", "load_model", "read_weights",
           "Module", "Parameter", "MSELoss", "L1Loss", "CrossEntropyLoss", "BCEWithLogitsLoss"]
__all__ += ["Conv1d", "Conv2d", "ConvTranspose2d", "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "BatchNorm2d", "Flatten", "ReLU6",
            "LeakyReLU", "Hardsigmoid", "Hardswish", "SiLU", "Upsample"]
__all__ += ["MultiheadAttention"]
