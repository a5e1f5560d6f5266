"""Pooling layers (NCHW): MaxPool2d, AvgPool2d, AdaptiveAvgPool2d."""

from opforge.nn import functional_vision as F
from opforge.nn.layer import Layer, register_layer


@register_layer
class MaxPool2d(Layer):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, name=None, dtype="float32"):
        super().__init__(name, dtype)
        self.config = {"kernel_size": kernel_size, "stride": stride, "padding": padding, "dilation": dilation,
                       "ceil_mode": bool(ceil_mode)}

    def forward(self, x):
        return F.max_pool2d(x, **self.config)


@register_layer
class AvgPool2d(Layer):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True, name=None,
                 dtype="float32"):
        super().__init__(name, dtype)
        self.config = {"kernel_size": kernel_size, "stride": stride, "padding": padding,
                       "ceil_mode": bool(ceil_mode), "count_include_pad": bool(count_include_pad)}

    def forward(self, x):
        return F.avg_pool2d(x, **self.config)


@register_layer
class AdaptiveAvgPool2d(Layer):
    def __init__(self, output_size, name=None, dtype="float32"):
        super().__init__(name, dtype)
        self.config = {"output_size": output_size}

    def forward(self, x):
        return F.adaptive_avg_pool2d(x, self.config["output_size"])
