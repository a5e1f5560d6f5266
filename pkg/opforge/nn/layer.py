"""Layer: the base of every layer (name, dtype, device, named weights, config)."""

import numpy as np

from opforge import dtypes as _dtypes
from opforge import errors as _errors
from opforge.tensor import Tensor, tensor

_LAYERS = {}  # class name -> class, for load_model


def register_layer(cls):
    """Class decorator: lets load_model rebuild `cls` from its config."""
    _LAYERS[cls.__name__] = cls
    return cls


def layer_class(name, path):
    cls = _LAYERS.get(name)
    if cls is None:
        raise _errors.InvalidArgumentError(
            f"load_model: {path!s}: unknown layer class {name!r} (known: {', '.join(sorted(_LAYERS))}; "
            "custom layers need @opforge.nn.register_layer)")
    return cls


def parameter(array, copy=True):
    """A trainable Tensor over a copy of `array`, or over `array` itself (copy=False: zero-copy loading).

    Either way the storage is writable: optimizers update it in place.
    """
    t = tensor(np.array(array, copy=True, order="C") if copy else array)
    if t.dtype.name.startswith("float"):
        t.requires_grad = True  # marks the leaf without copying (tensor(..., requires_grad=True) would copy)
    return t


def no_grad():
    import opforge
    return opforge.no_grad()


class Layer:
    """A layer: a name, a dtype, device "cpu", named weights and sublayers.

    Subclasses declare weights with `self.add_weight(name, array)` and
    sublayers with `self.add_layer(name, layer)`, record the arguments that
    rebuild them in `self.config`, and implement `forward(*xs)`.
    """

    device = "cpu"

    def __init__(self, name=None, dtype="float32"):
        self.name = name or type(self).__name__.lower()
        self.dtype = _dtypes.as_dtype(dtype)
        self.training = True
        self.config = {}
        self._weights = {}
        self._layers = {}

    # -- weights
    def add_weight(self, name, array):
        array = np.asarray(array, dtype=self.dtype.name)
        self._weights[name] = parameter(array)
        return self._weights[name]

    def add_layer(self, name, layer):
        if not isinstance(layer, Layer):
            raise _errors.InvalidArgumentError(f"{type(self).__name__}: {name!r} is a {type(layer).__name__}, not a Layer")
        self._layers[name] = layer
        return layer

    def named_weights(self, prefix=""):
        """(dotted name, Tensor) for this layer's weights, then its sublayers'."""
        for name, w in self._weights.items():
            yield prefix + name, w
        for lname, layer in self._layers.items():
            yield from layer.named_weights(f"{prefix}{lname}.")

    def weights(self):
        return dict(self.named_weights())

    def parameters(self):
        return [w for _, w in self.named_weights()]

    def get_weight(self, name):
        w = self.weights().get(name)
        if w is None:
            raise _errors.NotFoundError(f"{self.name}: no weight named {name!r} (has: {', '.join(self.weights())})")
        return w

    def check_weight(self, name, array, source=""):
        """The array as set_weight would store it; raises naming the weight on a mismatch."""
        where = f" in {source}" if source else ""
        current = self.weights().get(name)
        if current is None:
            raise _errors.InvalidArgumentError(
                f"{self.name}: unexpected weight {name!r}{where} (expected: {', '.join(self.weights())})")
        array = np.asarray(array)
        if array.dtype != np.dtype(current.dtype.name):
            raise _errors.InvalidArgumentError(
                f"{self.name}: weight {name!r}{where} has dtype {array.dtype}, expected {current.dtype.name}")
        if tuple(array.shape) != tuple(current.shape):
            raise _errors.InvalidArgumentError(
                f"{self.name}: weight {name!r}{where} has shape {tuple(array.shape)}, expected {tuple(current.shape)}")
        return array

    def set_weight(self, name, array):
        """Replaces weight `name` (dotted for sublayers) after checking its shape and dtype."""
        array = self.check_weight(name, array)
        self.set_weights({name: array})

    def set_weights(self, arrays, copy=True):
        """Sets several weights at once; every one is checked before any is set."""
        for name, array in arrays.items():
            self.check_weight(name, array)
        for name, array in arrays.items():
            owner, leaf = self._owner(name)
            owner._weights[leaf] = parameter(array, copy)

    def _owner(self, dotted):
        layer, parts = self, dotted.split(".")
        for p in parts[:-1]:
            layer = layer._layers[p]
        return layer, parts[-1]

    # -- modes
    def train(self, mode=True):
        self.training = mode
        for layer in self._layers.values():
            layer.train(mode)
        return self

    def eval(self):
        return self.train(False)

    # -- calling
    def forward(self, *xs):
        raise NotImplementedError(f"{type(self).__name__} does not define forward()")

    def __call__(self, *xs):
        return self.forward(*xs)

    # -- files
    def get_config(self):
        return {"class": type(self).__name__, "name": self.name, "dtype": self.dtype.name, **self.config}

    def save(self, path):
        """Writes the weights and the config (in the metadata) to a safetensors file."""
        from opforge.nn.model_file import save
        save(self, path)

    def load_weights(self, path):
        """Loads weights from a safetensors file: all of them, exactly matching, or none."""
        from opforge.nn.model_file import load_weights
        load_weights(self, path)
        return self

    def __repr__(self):
        inner = "".join(f"\n  ({n}): " + repr(l).replace("\n", "\n  ") for n, l in self._layers.items())
        args = ", ".join(f"{k}={v!r}" for k, v in self.config.items() if k != "layers")
        return f"{type(self).__name__}({args}{inner}{chr(10) if inner else ''})"


__all__ = ["Layer", "register_layer", "Tensor"]
