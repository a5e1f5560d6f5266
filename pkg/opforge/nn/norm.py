"""BatchNorm2d: batch statistics in train(), running statistics in eval(); both saved in model files."""

import numpy as np

from opforge.nn import functional_vision as F
from opforge.nn.layer import Layer, register_layer


@register_layer
class BatchNorm2d(Layer):
    """Normalises each channel of [N, C, H, W] input, then scales (weight) and shifts (bias), as PyTorch.

    running_mean and running_var are weights without gradients: model files
    carry them, optimizers skip them (their .grad stays None).
    """

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, name=None, dtype="float32"):
        super().__init__(name, dtype)
        self.config = {"num_features": int(num_features), "eps": float(eps), "momentum": float(momentum),
                       "affine": bool(affine)}
        if affine:
            self.add_weight("weight", np.ones(num_features))
            self.add_weight("bias", np.zeros(num_features))
        for stat, init in (("running_mean", np.zeros), ("running_var", np.ones)):
            self.add_weight(stat, init(num_features)).requires_grad = False

    def set_weights(self, arrays, copy=True):
        super().set_weights(arrays, copy)
        for stat in ("running_mean", "running_var"):
            self._weights[stat].requires_grad = False

    def parameters(self):
        """The trainable weights (the running statistics are not)."""
        return [w for n, w in self.named_weights() if not n.endswith(("running_mean", "running_var"))]

    def forward(self, x):
        c, w = self.config, self._weights
        return F.batch_norm(x, w["running_mean"], w["running_var"], w.get("weight"), w.get("bias"),
                            training=self.training, momentum=c["momentum"], eps=c["eps"])
