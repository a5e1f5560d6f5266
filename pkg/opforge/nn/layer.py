"""Layer: the base of every layer (name, dtype, device, named weights, config)."""

import numpy as np

from opforge import _write_generation
from opforge import dtypes as _dtypes
from opforge import errors as _errors
from opforge.tensor import Tensor, tensor

_LAYERS: dict = {}  # class name -> class, for load_model


def register_layer(cls):
    """Class decorator: lets load_model rebuild `cls` from its config."""
    _LAYERS[cls.__name__] = cls
    return cls


# Layers defined outside opforge.nn, imported when load_model meets them.
_ELSEWHERE = {"QuantizedLinear": "opforge.quantization"}


def layer_class(name, path):
    cls = _LAYERS.get(name)
    if cls is None and name in _ELSEWHERE:
        import importlib
        importlib.import_module(_ELSEWHERE[name])
        cls = _LAYERS.get(name)
    if cls is None:
        raise _errors.InvalidArgumentError(
            f"load_model: {path!s}: unknown layer class {name!r} (known: {', '.join(sorted(_LAYERS))}; "
            "custom layers need @opforge.nn.register_layer)")
    return cls


def _own_copy(array):
    """A copy of `array`; float32/float64 in opforge's allocator, which puts
    blocks of 1 MiB and more on huge pages (numpy's copy sat on 4 KiB pages
    below its 4 MiB threshold). A weight is read by every forward and
    written by every optimizer step: fewer page walks for both (docs/gemm.md)."""
    a = np.asarray(array.numpy() if isinstance(array, Tensor) else array)
    if a.dtype in (np.float32, np.float64):
        from opforge import ops as _ops
        out = _ops.fill(list(a.shape), np.zeros((), a.dtype))
        np.asarray(out)[...] = a
        return out
    return tensor(np.array(a, copy=True, order="C"))


def parameter(array, copy=True):
    """A trainable Tensor over a copy of `array`, or over `array` itself (copy=False: zero-copy loading).

    Either way the storage is writable: optimizers update it in place.
    """
    t = _own_copy(array) if copy else tensor(array)
    if t.dtype.is_floating:
        t.requires_grad = True  # marks the leaf without copying (tensor(..., requires_grad=True) would copy)
    return t


def _is_parameter(value):
    ag = getattr(value, "_ag", None)
    return isinstance(value, Tensor) and ag is not None and ag.requires_grad and ag.grad_fn is None


def Parameter(data, requires_grad=True):
    """A leaf tensor that a Module registers when assigned as an attribute (torch.nn.Parameter).

    opforge has no Parameter class: this is a float Tensor with requires_grad
    set, over its own writable copy of `data`.
    """
    array = data.numpy() if isinstance(data, Tensor) else np.asarray(data)
    t = parameter(array)
    if not requires_grad and t.requires_grad:
        t.requires_grad = False
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
        d = self.__dict__  # before __setattr__ can look for the registries
        d["_weights"], d["_layers"], d["_buffers"] = {}, {}, {}
        self.name = name or type(self).__name__.lower()
        self.dtype = _dtypes.as_dtype(dtype)
        self.training = True
        self.config = {}

    # -- PyTorch's registration by assignment: `self.fc = Linear(...)`, `self.w = Parameter(...)`
    def __setattr__(self, name, value):
        d = self.__dict__
        if "_weights" not in d:
            if isinstance(value, Layer) or _is_parameter(value):
                raise AttributeError(f"{type(self).__name__}: call super().__init__() before assigning layers or "
                                     "parameters")
            object.__setattr__(self, name, value)
            return
        for registry in (d["_weights"], d["_layers"], d["_buffers"]):
            registry.pop(name, None)
        if isinstance(value, Layer):
            d["_layers"][name] = value
            d.pop(name, None)
        elif _is_parameter(value):
            d["_weights"][name] = value
            d.pop(name, None)
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name):  # only called when normal lookup fails
        d = self.__dict__
        for registry in ("_weights", "_layers", "_buffers"):
            found = d.get(registry, {}).get(name)
            if found is not None:
                return found
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __delattr__(self, name):
        for registry in ("_weights", "_layers", "_buffers"):
            if name in self.__dict__.get(registry, {}):
                del self.__dict__[registry][name]
                return
        object.__delattr__(self, name)

    def register_buffer(self, name, value):
        """A tensor that is state but not a parameter (in state_dict, not in parameters())."""
        self.__dict__["_buffers"][name] = value if value is None else tensor(np.asarray(value))

    def register_parameter(self, name, value):
        self.__dict__["_weights"][name] = value

    # -- weights
    def add_weight(self, name, array):
        array = np.asarray(array, dtype=self.dtype.as_numpy_dtype)
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
        if current.dtype != array.dtype:
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

    # -- PyTorch's names
    def named_parameters(self, prefix="", recurse=True):
        """(dotted name, parameter) pairs, named as PyTorch names them ("fc1.weight", "0.bias")."""
        if not recurse:
            yield from ((prefix + n, w) for n, w in self._weights.items())
            return
        yield from self.named_weights(prefix)

    def named_children(self):
        yield from self._layers.items()

    def children(self):
        yield from self._layers.values()

    def named_modules(self, prefix=""):
        yield prefix, self
        for name, layer in self._layers.items():
            yield from layer.named_modules(f"{prefix}.{name}" if prefix else name)

    def modules(self):
        return (m for _, m in self.named_modules())

    def named_buffers(self, prefix=""):
        for name, b in self._buffers.items():
            if b is not None:
                yield prefix + name, b
        for lname, layer in self._layers.items():
            yield from layer.named_buffers(f"{prefix}{lname}.")

    def state_dict(self):
        """Parameters and buffers by dotted name, as detached Tensors sharing this model's memory."""
        import collections
        out = collections.OrderedDict((n, w.detach()) for n, w in self.named_weights())
        out.update((n, b.detach()) for n, b in self.named_buffers())
        return out

    def load_state_dict(self, state_dict, strict=True):
        """Copies values (Tensors, numpy arrays, or anything np.asarray reads, e.g. a PyTorch
        state dict) into the parameters in place, so optimizers keep their references.

        With strict, missing or unexpected keys raise (naming them) and nothing is written;
        shapes are always checked first. Returns (missing_keys, unexpected_keys).
        """
        import collections
        targets = dict(self.named_weights())
        targets.update(self.named_buffers())
        missing = [k for k in targets if k not in state_dict]
        unexpected = [k for k in state_dict if k not in targets]
        if strict and (missing or unexpected):
            raise _errors.InvalidArgumentError(
                f"{type(self).__name__}.load_state_dict: missing keys {missing}, unexpected keys {unexpected}")
        arrays = {}
        for k in targets:
            if k not in state_dict:
                continue
            v = state_dict[k]
            if hasattr(v, "detach") and hasattr(v, "cpu") and not isinstance(v, Tensor):  # a torch tensor
                v = v.detach().cpu().numpy()
            a = np.asarray(v)
            t = targets[k]
            if tuple(a.shape) != tuple(t.shape):
                raise _errors.InvalidArgumentError(
                    f"{type(self).__name__}.load_state_dict: {k!r} has shape {tuple(a.shape)}, "
                    f"expected {tuple(t.shape)}")
            arrays[k] = a
        for k, a in arrays.items():
            view = targets[k].numpy()
            if view.flags.writeable:
                np.copyto(view, a, casting="unsafe")
            else:
                owner, leaf = self._owner(k)
                owner.__dict__["_weights" if leaf in owner._weights else "_buffers"][leaf] = parameter(
                    a.astype(view.dtype))
        _write_generation.bump()  # written in place: caches of the old values are stale
        return collections.namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])(missing, unexpected)

    def zero_grad(self, set_to_none=True):
        for w in self.parameters():
            w.grad = None

    def apply(self, fn):
        for layer in self._layers.values():
            layer.apply(fn)
        fn(self)
        return self

    def requires_grad_(self, requires_grad=True):
        for w in self.parameters():
            w.requires_grad = requires_grad
        return self

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

    def __call__(self, *xs, **kwargs):
        from opforge import amp
        if amp.autocast_dtype() is not None:
            return amp.call(self, xs, kwargs)
        return self.forward(*xs, **kwargs)

    # -- precision
    def to(self, dtype=None, device=None):
        """Converts every floating weight and buffer (and each layer's dtype) to `dtype`
        (e.g. ``of.bfloat16``, ``of.float16``, ``of.float32``); returns self, like PyTorch.

        The weights are new tensors: make the optimizer after ``to``. A device
        other than "cpu" is an error; ``to("cpu")`` changes nothing.
        """
        if isinstance(dtype, str) and dtype == "cpu" and device is None:
            dtype, device = None, "cpu"
        if device not in (None, "cpu"):
            raise _errors.InvalidArgumentError(f"{type(self).__name__}.to: opforge runs on the cpu, not {device!r}")
        if dtype is None:
            return self
        d = _dtypes.as_dtype(dtype)
        if not d.is_floating:
            raise _errors.InvalidArgumentError(f"{type(self).__name__}.to: {d.name} is not a floating dtype")
        import opforge
        for _, layer in self.named_modules():
            for registry in ("_weights", "_buffers"):
                entries = layer.__dict__[registry]
                for name, w in list(entries.items()):
                    if isinstance(w, Tensor) and w.dtype.is_floating and w.dtype is not d:
                        trainable = registry == "_weights" and w.requires_grad
                        with opforge.no_grad():
                            new = opforge.cast(w.detach(), d)
                        if trainable:
                            new.requires_grad = True  # a new leaf, as parameter() makes them
                        entries[name] = new
            layer.dtype = d
        return self

    def half(self):
        """to(float16)."""
        return self.to(_dtypes.float16)

    def bfloat16(self):
        """to(bfloat16)."""
        return self.to(_dtypes.bfloat16)

    def float(self):
        """to(float32)."""
        return self.to(_dtypes.float32)

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


Module = Layer  # PyTorch's name

__all__ = ["Layer", "Module", "Parameter", "register_layer", "Tensor"]
