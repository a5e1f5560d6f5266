"""QuantizedLinear and quantize_dynamic."""

import copy

import numpy as np

import opforge.nn as _nn  # the package first: importing opforge.nn.layer before it (lazy) loads a second copy
from opforge import errors as _errors
from opforge import ops as _ops
from opforge.quantization._functional import pack_eagerly, quantize_weight
from opforge.tensor import tensor

_ZERO_I8 = np.zeros((), np.int8)
_NO_BIAS = np.zeros(0, np.float32)


@_nn.register_layer
class QuantizedLinear(_nn.Layer):
    """nn.Linear with int8 weights and dynamically quantized uint8 activations (inference only).

    Weights: `weight_int8` [in_features, out_features] (the transposed layout
    MatMulInteger multiplies by), symmetric, with one float32 scale per output
    feature in `weight_scale`; `bias` stays float32. Each call quantizes x per
    tensor (DynamicQuantizeLinear), multiplies in int32 and rescales:
    y = (xq - x_zero) @ weight_int8 * (x_scale * weight_scale) + bias.
    """

    def __init__(self, in_features, out_features, bias=True, name=None, dtype="float32"):
        super().__init__(name, dtype)
        if self.dtype.name != "float32":
            raise _errors.InvalidArgumentError(f"QuantizedLinear: dtype must be float32, got {self.dtype.name}")
        self.config = {"in_features": int(in_features), "out_features": int(out_features), "bias": bool(bias)}
        self.training = False
        self._weights["weight_int8"] = tensor(np.zeros((in_features, out_features), np.int8))
        self._weights["weight_scale"] = tensor(np.ones(out_features, np.float32))
        if bias:
            self._weights["bias"] = tensor(np.zeros(out_features, np.float32))

    @classmethod
    def from_float(cls, linear):
        """The quantized copy of an nn.Linear (its weights read once; the Linear is left as it was)."""
        w = linear._weights["weight"].numpy()
        out_f, in_f = w.shape
        b = linear._weights.get("bias")
        q = cls(in_f, out_f, bias=b is not None, name=linear.name)
        wq, scale = quantize_weight(w, axis=0)
        q._weights["weight_int8"] = tensor(np.ascontiguousarray(wq.T))
        q._weights["weight_scale"] = tensor(scale)
        if b is not None:
            q._weights["bias"] = tensor(np.array(b.numpy(), np.float32))
        return q

    def set_weights(self, arrays, copy=True):
        # Loaded weights are constants, never parameters (nothing here trains).
        for name, array in arrays.items():
            self.check_weight(name, array)
        for name, array in arrays.items():
            self._weights[name] = tensor(np.array(array) if copy else array)

    def packed_weight(self):
        """weight_int8 packed for the 8-bit GEMM (PackMatMulIntegerWeight), made once and kept until
        the weight changes; not saved (a per-process cache: the layout depends on the CPU)."""
        w = self._weights["weight_int8"]
        cached = self.__dict__.get("_packed")
        if cached is None or cached[0] is not w:
            cached = (w, pack_eagerly(_ops.pack_mat_mul_integer_weight, w, _ZERO_I8))
            self.__dict__["_packed"] = cached
        return cached[1]

    def __getstate__(self):  # pickles and deep copies leave the packed cache behind
        state = dict(self.__dict__)
        state.pop("_packed", None)
        return state

    def forward(self, x):
        # DynamicQuantizeLinear, the int8 product and the rescale in one op,
        # over the weight packed once (onnxruntime's DynamicQuantizeMatMul).
        b = self._weights.get("bias")
        bias = b if b is not None else _NO_BIAS
        return _ops.dynamic_quantize_mat_mul(x, self.packed_weight(), self._weights["weight_scale"], bias,
                                             n=self.config["out_features"])


def quantize_dynamic(model, inplace=False):
    """Replaces every opforge.nn.Linear in `model` by a QuantizedLinear; returns the model.

    inplace=False (the default) quantizes a deep copy and leaves `model` as
    it was. A model that is itself a Linear comes back as a QuantizedLinear.
    Other layers keep their float weights.
    """
    Linear = _nn.Linear
    if not isinstance(model, _nn.Layer):
        raise _errors.InvalidArgumentError(f"quantize_dynamic: argument 'model' must be an opforge.nn Layer, "
                                           f"got {type(model).__name__}")
    if isinstance(model, Linear):
        return QuantizedLinear.from_float(model)
    if not inplace:
        model = copy.deepcopy(model)

    def walk(layer):
        for name, child in list(layer._layers.items()):
            if isinstance(child, Linear):
                layer._layers[name] = QuantizedLinear.from_float(child)
            else:
                walk(child)

    walk(model)
    return model
