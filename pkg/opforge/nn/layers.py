"""The built-in layers. Weights start as PyTorch's do; forward calls registered ops only."""

import numpy as np

from opforge import errors as _errors
from opforge import ops as _ops
from opforge.nn import functional as F
from opforge.nn.layer import Layer, layer_class, register_layer


def _rng(seed):
    if seed is None:  # the next stream of opforge.random: of.manual_seed(n) makes model init repeatable
        from opforge import random
        seed = list(random.get_seed())
    return np.random.default_rng(seed)


@register_layer
class Linear(Layer):
    """y = x @ weight.T + bias, weight of shape [out_features, in_features] (PyTorch's layout)."""

    def __init__(self, in_features, out_features, bias=True, name=None, dtype="float32", seed=None):
        super().__init__(name, dtype)
        self.config = {"in_features": int(in_features), "out_features": int(out_features), "bias": bool(bias)}
        bound = 1.0 / np.sqrt(in_features) if in_features else 0.0
        rng = _rng(seed)
        self.add_weight("weight", rng.uniform(-bound, bound, (out_features, in_features)))
        if bias:
            self.add_weight("bias", rng.uniform(-bound, bound, (out_features,)))

    def forward(self, x):
        return F.linear(x, self._weights["weight"], self._weights.get("bias"))


@register_layer
class Embedding(Layer):
    """Rows of weight [num_embeddings, embedding_dim] at integer ids (bounds-checked)."""

    def __init__(self, num_embeddings, embedding_dim, name=None, dtype="float32", seed=None):
        super().__init__(name, dtype)
        self.config = {"num_embeddings": int(num_embeddings), "embedding_dim": int(embedding_dim)}
        self.add_weight("weight", _rng(seed).standard_normal((num_embeddings, embedding_dim)))

    def forward(self, ids):
        return _ops.gather(self._weights["weight"], ids)


@register_layer
class RMSNorm(Layer):
    def __init__(self, dim, eps=1e-6, name=None, dtype="float32"):
        super().__init__(name, dtype)
        self.config = {"dim": int(dim), "eps": float(eps)}
        self.add_weight("weight", np.ones(dim))

    def forward(self, x):
        return _ops.rms_norm(x, self._weights["weight"], epsilon=self.config["eps"])


@register_layer
class LayerNorm(Layer):
    def __init__(self, dim, eps=1e-5, name=None, dtype="float32"):
        super().__init__(name, dtype)
        self.config = {"dim": int(dim), "eps": float(eps)}
        self.add_weight("weight", np.ones(dim))
        self.add_weight("bias", np.zeros(dim))

    def forward(self, x):
        return _ops.layer_norm(x, self._weights["weight"], self._weights["bias"], epsilon=self.config["eps"])


@register_layer
class Dropout(Layer):
    """Zeroes each element with probability p while training (scaling the rest by 1/(1-p)); identity in eval().

    The masks come from the DropoutMask op, seeded from `seed` and a per-call counter, so a run is repeatable.
    """

    def __init__(self, p=0.5, seed=0, name=None, dtype="float32"):
        super().__init__(name, dtype)
        if not 0 <= p < 1:
            raise _errors.InvalidArgumentError(f"Dropout: p must be in [0, 1), got {p}")
        self.config = {"p": float(p), "seed": int(seed)}
        self._calls = 0

    def forward(self, x):
        if not self.training or self.config["p"] == 0:
            return x
        self._calls += 1
        return F.dropout(x, self.config["p"], seed=(self.config["seed"] << 32) + self._calls)


@register_layer
class ReLU(Layer):
    def forward(self, x):
        return _ops.relu(x)


@register_layer
class GELU(Layer):
    """The exact (erf-based) GELU."""

    def forward(self, x):
        return _ops.gelu(x)


@register_layer
class Softmax(Layer):
    def __init__(self, axis=-1, name=None, dtype="float32"):
        super().__init__(name, dtype)
        self.config = {"axis": int(axis)}

    def forward(self, x):
        return _ops.softmax(x, axis=self.config["axis"])


@register_layer
class Sequential(Layer):
    """Calls its layers in order; weights are named "<index>.<weight>"."""

    def __init__(self, *layers, name=None, dtype="float32"):
        super().__init__(name, dtype)
        for i, layer in enumerate(layers):
            self.add_layer(str(i), layer)

    def __len__(self):
        return len(self._layers)

    def __getitem__(self, i):
        return list(self._layers.values())[i]

    def forward(self, x):
        from opforge import amp
        layers = list(self._layers.values())
        fuse = amp.autocast_dtype() is None  # under autocast each layer's own call casts its inputs
        i = 0
        while i < len(layers):
            act = _fused_activation(layers[i], layers[i + 1] if i + 1 < len(layers) else None) if fuse else None
            if act is not None:  # Linear then its activation: one FusedMatMul (the epilogue applies it)
                w = layers[i]._weights
                x = F.linear(x, w["weight"], w["bias"], activation=act)
                i += 2
            else:
                x = layers[i](x)
                i += 1
        return x

    def get_config(self):
        return {**super().get_config(), "layers": [l.get_config() for l in self._layers.values()]}

    @classmethod
    def from_config(cls, config, path):
        return cls(*(build(c, path) for c in config["layers"]), name=config.get("name"),
                   dtype=config.get("dtype", "float32"))


def _fused_activation(layer, nxt):
    """The FusedMatMul activation for a Linear (with a bias) followed by `nxt`, or None.

    Exact classes only: a subclass may change forward."""
    if type(layer) is not Linear or not layer.config["bias"]:
        return None
    act = _ACTIVATION_LAYERS.get(type(nxt).__name__)
    if act is None or type(nxt).__module__ not in ("opforge.nn.layers", "opforge.nn.activations"):
        return None
    return act


_ACTIVATION_LAYERS = {"ReLU": "relu", "GELU": "gelu", "SiLU": "silu"}


def build(config, path):
    """Rebuilds a layer (without meaningful weights) from get_config()'s dict."""
    if not isinstance(config, dict) or not isinstance(config.get("class"), str):
        raise _errors.InvalidArgumentError(f"load_model: {path!s}: the layer config is not a dict with a 'class'")
    cls = layer_class(config["class"], path)
    if hasattr(cls, "from_config"):
        return cls.from_config(config, path)
    kwargs = {k: v for k, v in config.items() if k != "class"}
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as e:
        raise _errors.InvalidArgumentError(f"load_model: {path!s}: cannot build {config['class']} from its config: {e}") from e
