"""Shape and activation layers for vision models: Flatten, Upsample, ReLU6, LeakyReLU, Hardsigmoid, Hardswish, SiLU."""

from opforge.nn import functional_vision as F
from opforge.nn.layer import Layer, register_layer


@register_layer
class Flatten(Layer):
    def __init__(self, start_dim=1, name=None, dtype="float32"):
        super().__init__(name, dtype)
        self.config = {"start_dim": int(start_dim)}

    def forward(self, x):
        return F.flatten(x, self.config["start_dim"])


@register_layer
class ReLU6(Layer):
    def forward(self, x):
        return F.relu6(x)


@register_layer
class LeakyReLU(Layer):
    def __init__(self, negative_slope=0.01, name=None, dtype="float32"):
        super().__init__(name, dtype)
        self.config = {"negative_slope": float(negative_slope)}

    def forward(self, x):
        return F.leaky_relu(x, self.config["negative_slope"])


@register_layer
class Hardsigmoid(Layer):
    def forward(self, x):
        return F.hardsigmoid(x)


@register_layer
class Hardswish(Layer):
    def forward(self, x):
        return F.hardswish(x)


@register_layer
class SiLU(Layer):
    def forward(self, x):
        return F.silu(x)


@register_layer
class Upsample(Layer):
    """Upsampling of [N, C, H, W]: mode 'nearest' (integer factors) or 'bilinear' (align_corners as PyTorch)."""

    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None, name=None, dtype="float32"):
        super().__init__(name, dtype)
        self.config = {"size": size, "scale_factor": scale_factor, "mode": mode, "align_corners": align_corners}

    def forward(self, x):
        return F.interpolate(x, **self.config)
