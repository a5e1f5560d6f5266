"""The operators of ONNX's default domain that opforge.onnx does not map
directly, each with the reason: the one list (docs/onnx_operators.md shows
it; tests/test_onnx_operator_coverage.py checks that every operator of the
installed onnx is mapped, expanded from its function body, or listed here).

EXPANDED: no converter, but the schema is a function of mapped operators,
so import replaces the node by its body (_functions.py).
LEFT_OUT: operator -> why it is not mapped.
"""

EXPANDED = frozenset({
    "AffineGrid", "BlackmanWindow", "CausalConvWithState", "CenterCropPad", "HammingWindow", "HannWindow",
    "LinearAttention", "NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss", "SwiGLU",
})

_SEQUENCE = "sequence/optional values: opforge values are tensors only"
_STRING = "string tensors: opforge is a numeric library (no string dtype)"
_RANDOM = ("random draws: no backend case checks values, and opforge's Philox streams are not "
           "onnxruntime's; not mapped yet")
_SIGNAL = "signal processing: needs an FFT kernel, not built"

LEFT_OUT = {
    **{op: _SEQUENCE for op in ("ConcatFromSequence", "Optional", "OptionalGetElement", "OptionalHasElement",
                                "SequenceAt", "SequenceConstruct", "SequenceEmpty", "SequenceErase",
                                "SequenceInsert", "SequenceLength", "SequenceMap", "SplitToSequence")},
    **{op: _STRING for op in ("RegexFullMatch", "StringConcat", "StringNormalizer", "StringSplit")},
    "ImageDecoder": "decodes encoded image bytes (JPEG, PNG, ...): out of scope for a numeric library",
    **{op: _RANDOM for op in ("RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike",
                              "Multinomial", "Bernoulli")},
    **{op: _SIGNAL for op in ("DFT", "STFT", "MelWeightMatrix")},
    "RoiAlign": "region pooling: needs a kernel (vision family), not built",
    "MaxRoiPool": "region pooling: needs a kernel (vision family), not built",
    "MaxUnpool": "needs MaxPool's Indices output, which opforge's pools do not produce",
    "DeformConv": "deformable convolution: needs a kernel (vision family), not built",
    "Det": "needs an LU-factorization kernel, not built",
    "GlobalLpPool": "composes as LpPool does, but onnx ships no backend case for it to check a mapping against",
}
