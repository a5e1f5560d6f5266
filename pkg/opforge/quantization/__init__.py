"""Post-training int8 quantization (issue 25): quantize_dynamic and the ops' Python helpers.

    import opforge as of
    qmodel = of.quantization.quantize_dynamic(model)   # Linear -> QuantizedLinear (int8 weights)

`quantize_dynamic` replaces each `opforge.nn.Linear` by a `QuantizedLinear`:
int8 weights, symmetric per output channel, and activations quantized to
uint8 per call (DynamicQuantizeLinear), multiplied on the 8-bit GEMM
(MatMulInteger) and scaled back to float32. Quantized models save and load
with `Layer.save` / `opforge.nn.load_model` like any other.

`quantize_linear` / `dequantize_linear` check their scale and zero point in
Python (a zero point outside the target type's range, a scale of zero, NaN
or infinity raise InvalidArgumentError naming the argument) and call the ops
of the same name.
"""

from opforge.quantization._functional import dequantize_linear, gemm_isa, quantize_linear, quantize_weight
from opforge.quantization._layers import QuantizedLinear, quantize_dynamic

__all__ = ["quantize_dynamic", "QuantizedLinear", "quantize_linear", "dequantize_linear", "quantize_weight", "gemm_isa"]
