"""Shape and activation layers for vision models: Flatten, ReLU6, LeakyReLU, Hardsigmoid, Hardswish, SiLU, Upsample."""

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
