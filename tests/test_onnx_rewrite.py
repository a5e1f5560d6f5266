"""Import-time rewrites (pkg/opforge/onnx/_rewrite.py): decomposed GELU,
RMSNorm and LayerNorm become one operator; onnxruntime runs the unfused model
as the oracle, and a pattern that does not qualify is left alone."""

import os

import numpy as np
import pytest

if os.environ.get("OPFORGE_SANITIZED"):
    pytest.skip("ONNX suites run in the plain build only", allow_module_level=True)

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import opforge.onnx  # noqa: E402
from test_onnx_import import _model, _ort, _vi  # noqa: E402

RNG = np.random.default_rng(0)


def _c(name, value):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(value)))


def _types(prog):
    return [ctx.node.op_type for ctx, _, _ in prog.steps]


def _check(model, feeds, fused, unfused_op):
    prog = opforge.onnx.load(model)
    assert fused in _types(prog) and unfused_op not in _types(prog), _types(prog)
    want = _ort(model, feeds)
    for _ in range(2):  # eager, then the compiled graph
        for got, w in zip(prog.run(feeds), want):
            np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-5)
    return prog


def _gelu_nodes(x="h", y="y", grouping=0, div=np.sqrt(2.0)):
    nodes = [_c("c2", np.float32(div)), _c("one", np.float32(1)), _c("half", np.float32(0.5)),
             helper.make_node("Div", [x, "c2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["a"])]
    if grouping == 0:  # (x * a) * 0.5, as BERT exports it
        nodes += [helper.make_node("Mul", [x, "a"], ["m"]), helper.make_node("Mul", ["m", "half"], [y])]
    elif grouping == 1:  # x * (a * 0.5)
        nodes += [helper.make_node("Mul", ["a", "half"], ["m"]), helper.make_node("Mul", [x, "m"], [y])]
    else:  # (x * 0.5) * a
        nodes += [helper.make_node("Mul", [x, "half"], ["m"]), helper.make_node("Mul", ["m", "a"], [y])]
    return nodes


@pytest.mark.parametrize("grouping", [0, 1, 2])
def test_erf_gelu_becomes_gelu(grouping):
    w = RNG.standard_normal((8, 6)).astype(np.float32)
    b = RNG.standard_normal(6).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["mm"]), helper.make_node("Add", ["mm", "b"], ["h"])]
    nodes += _gelu_nodes(grouping=grouping)
    model = _model(nodes, [_vi("x", [3, 8])], [_vi("y", None)],
                   [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    _check(model, {"x": RNG.standard_normal((3, 8)).astype(np.float32)}, "Gelu", "Erf")


def test_gelu_with_a_wrong_constant_or_a_shared_intermediate_is_left_alone():
    x = {"h": RNG.standard_normal((2, 5)).astype(np.float32)}
    model = _model(_gelu_nodes(div=1.5), [_vi("h", [2, 5])], [_vi("y", None)])
    _check(model, x, "Erf", "Gelu")
    # The Erf's output is a graph output too: it must still exist.
    model = _model(_gelu_nodes(), [_vi("h", [2, 5])], [_vi("y", None), _vi("e", None)])
    _check(model, x, "Erf", "Gelu")


def _rms_nodes(cast):
    nodes = [_c("two", np.float32(2)), _c("ax", np.array([-1], np.int64)), _c("eps", np.float32(1e-6)),
             _c("one", np.float32(1)),
             helper.make_node("Cast", ["x0"], ["x"], to=TensorProto.FLOAT),
             helper.make_node("Pow", ["x", "two"], ["p"]),
             helper.make_node("ReduceMean", ["p", "ax"], ["ms"], keepdims=1),
             helper.make_node("Add", ["ms", "eps"], ["ae"]), helper.make_node("Sqrt", ["ae"], ["s"]),
             helper.make_node("Div", ["one", "s"], ["inv"]), helper.make_node("Mul", ["x", "inv"], ["n"])]
    if cast:
        nodes += [helper.make_node("Cast", ["n"], ["nc"], to=TensorProto.FLOAT),
                  helper.make_node("Identity", ["w0"], ["w"]), helper.make_node("Mul", ["w", "nc"], ["y"])]
    else:
        nodes += [helper.make_node("Mul", ["n", "w0"], ["y"])]
    return nodes


@pytest.mark.parametrize("cast", [False, True])
def test_decomposed_rms_norm_becomes_rms_normalization(cast):
    w = RNG.standard_normal(16).astype(np.float32)
    model = _model(_rms_nodes(cast), [_vi("x0", [2, 3, 16])], [_vi("y", None)], [numpy_helper.from_array(w, "w0")],
                   opset=18)
    _check(model, {"x0": RNG.standard_normal((2, 3, 16)).astype(np.float32)}, "RMSNormalization", "ReduceMean")


def test_rms_norm_over_another_axis_is_left_alone():
    nodes = _rms_nodes(False)
    nodes[1] = _c("ax", np.array([1], np.int64))
    w = RNG.standard_normal(16).astype(np.float32)
    model = _model(nodes, [_vi("x0", [2, 16, 16])], [_vi("y", None)], [numpy_helper.from_array(w, "w0")], opset=18)
    _check(model, {"x0": RNG.standard_normal((2, 16, 16)).astype(np.float32)}, "ReduceMean", "RMSNormalization")


def test_decomposed_layer_norm_becomes_layer_normalization():
    w = RNG.standard_normal(12).astype(np.float32)
    b = RNG.standard_normal(12).astype(np.float32)
    nodes = [_c("two", np.float32(2)), _c("eps", np.float32(1e-5)),
             helper.make_node("ReduceMean", ["x"], ["mu"], axes=[-1]),
             helper.make_node("Sub", ["x", "mu"], ["d"]), helper.make_node("Pow", ["d", "two"], ["p"]),
             helper.make_node("ReduceMean", ["p"], ["var"], axes=[-1]),
             helper.make_node("Add", ["var", "eps"], ["ve"]), helper.make_node("Sqrt", ["ve"], ["s"]),
             helper.make_node("Div", ["d", "s"], ["n"]), helper.make_node("Mul", ["n", "w"], ["nw"]),
             helper.make_node("Add", ["nw", "b"], ["y"])]
    model = _model(nodes, [_vi("x", [4, 12])], [_vi("y", None)],
                   [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    _check(model, {"x": RNG.standard_normal((4, 12)).astype(np.float32) * 3 + 1}, "LayerNormalization", "Sqrt")


def _attention_model(clean=False, mask=None, post_scale=False, k_layout="bhsd", b=2, h=2, s=5, d=4):
    """softmax(Q K^T * scale [+ mask]) V as torch.onnx exports it; K arrives as
    [B, H, S, D] (Transpose 0,1,3,2) or [B, S, H, D] (Transpose 0,2,3,1)."""
    c = np.float32(d ** -0.25)
    nodes = [_c("c", c), _c("cc", np.float32(np.sqrt(d))), _c("zero", np.float32(0))]
    perm = [0, 1, 3, 2] if k_layout == "bhsd" else [0, 2, 3, 1]
    nodes.append(helper.make_node("Transpose", ["k"], ["kt"], perm=perm))
    if post_scale:
        nodes += [helper.make_node("MatMul", ["q", "kt"], ["qk0"]), helper.make_node("Div", ["qk0", "cc"], ["qk"])]
    else:
        nodes += [helper.make_node("Mul", ["q", "c"], ["qs"]), helper.make_node("Mul", ["kt", "c"], ["kts"]),
                  helper.make_node("MatMul", ["qs", "kts"], ["qk"])]
    scores = "qk"
    inputs = [_vi("q", [b, h, s, d]), _vi("k", [b, h, s, d] if k_layout == "bhsd" else [b, s, h, d]),
              _vi("v", [b, h, s, d])]
    inits = []
    if mask is not None:
        nodes.append(helper.make_node("Add", ["qk", "mask"], ["sm_in"]))
        scores = "sm_in"
        if isinstance(mask, np.ndarray):
            inits.append(numpy_helper.from_array(mask, "mask"))
        else:
            inputs.append(_vi("mask", mask))
    nodes.append(helper.make_node("Softmax", [scores], ["p"], axis=-1))
    if clean:
        nodes += [helper.make_node("IsNaN", ["p"], ["nan"]), helper.make_node("Where", ["nan", "zero", "p"], ["pc"])]
    nodes.append(helper.make_node("MatMul", ["pc" if clean else "p", "v"], ["y"], name="attn_out"))
    return _model(nodes, inputs, [_vi("y", None)], inits, opset=18)


def _qkv(b=2, h=2, s=5, d=4, k_layout="bhsd"):
    q = RNG.standard_normal((b, h, s, d)).astype(np.float32)
    k = RNG.standard_normal((b, h, s, d) if k_layout == "bhsd" else (b, s, h, d)).astype(np.float32)
    return {"q": q, "k": k, "v": RNG.standard_normal((b, h, s, d)).astype(np.float32)}


def _graph_ops(prog):
    (entry,) = prog._compiled._entries.values()
    return {op.type for op in entry.session.graph.get_operations()}


@pytest.mark.parametrize("k_layout", ["bhsd", "bshd"])
@pytest.mark.parametrize("post_scale", [False, True])
def test_attention_with_a_constant_causal_mask_becomes_sdpa(k_layout, post_scale):
    causal = np.where(np.tril(np.ones((5, 5), bool)), 0, -np.inf).astype(np.float32)
    model = _attention_model(mask=causal, post_scale=post_scale, k_layout=k_layout)
    prog = _check(model, _qkv(k_layout=k_layout), "ScaledDotProductAttention", "Softmax")
    assert "ScaledDotProductAttention" in _graph_ops(prog) and "Softmax" not in _graph_ops(prog)


def test_attention_with_the_nan_cleanup_and_a_fed_mask_hides_whole_rows_as_zeros():
    model = _attention_model(clean=True, mask=[2, 1, 1, 5])
    feeds = _qkv()
    feeds["mask"] = np.zeros((2, 1, 1, 5), np.float32)
    feeds["mask"][1, ..., 1:3] = -np.inf
    prog = _check(model, feeds, "ScaledDotProductAttention", "Softmax")
    assert "ScaledDotProductAttention" in _graph_ops(prog)
    feeds["mask"][0] = -np.inf  # every key of batch 0 hidden: ONNX's cleanup gives zeros, as SDPA does
    (got,), (want,) = prog.run(feeds), _ort(model, feeds)
    assert (got[0] == 0).all()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_attention_without_the_cleanup_and_a_fed_mask_runs_unfused():
    # A fed mask may hide a whole row (NaN in ONNX): the fused converter
    # refuses at build time and the original nodes run.
    model = _attention_model(mask=[2, 1, 1, 5])
    feeds = _qkv()
    feeds["mask"] = np.zeros((2, 1, 1, 5), np.float32)
    feeds["mask"][0] = -np.inf
    prog = opforge.onnx.load(model)
    assert "ScaledDotProductAttention" in _types(prog)
    prog.run(feeds)
    (got,), (want,) = prog.run(feeds), _ort(model, feeds)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, equal_nan=True)
    assert np.isnan(got[0]).all() and "Softmax" in _graph_ops(prog)


def test_attention_whose_scores_are_also_an_output_is_left_alone():
    model = _attention_model()
    model.graph.output.append(_vi("qk", None))
    _check(model, _qkv(), "Softmax", "ScaledDotProductAttention")


def test_attention_in_float64_is_fused_too():
    model = _attention_model(mask=np.zeros((1, 1, 5, 5), np.float64))
    for vi in list(model.graph.input) + list(model.graph.output):
        vi.type.tensor_type.elem_type = TensorProto.DOUBLE
    for node in model.graph.node:
        if node.op_type == "Constant":
            node.attribute[0].t.CopyFrom(numpy_helper.from_array(
                numpy_helper.to_array(node.attribute[0].t).astype(np.float64)))
    feeds = {k: v.astype(np.float64) for k, v in _qkv().items()}
    prog = opforge.onnx.load(model)
    prog.run(feeds)
    np.testing.assert_allclose(prog.run(feeds)[0], _ort(model, feeds)[0], rtol=1e-10, atol=1e-10)
    assert "ScaledDotProductAttention" in _graph_ops(prog)


def _heads_last_model(b=2, s=5, h=2, d=4, also_read=False):
    """GPT-2's attention as exported: q, k, v [B, S, H, D] each Transposed to
    [B, H, S, D] (q's also read by a Shape, k and v through a one-input Concat,
    the empty key/value cache), the output Reshaped to itself and Transposed
    back. also_read: the [B, H, S, D] output is read by another node too (left as it is)."""
    c = np.float32(d ** -0.25)
    t = lambda x, y, perm=(0, 2, 1, 3): helper.make_node("Transpose", [x], [y], perm=list(perm))  # noqa: E731
    nodes = [_c("c", c), _c("target", np.array([b, -1, s, d], np.int64)),
             t("q", "qt"), t("k", "kt0"), t("v", "vt0"),
             helper.make_node("Shape", ["qt"], ["qshape"]),
             helper.make_node("Concat", ["kt0"], ["kt1"], axis=-2), helper.make_node("Concat", ["vt0"], ["vt"], axis=-2),
             t("kt1", "ktt", (0, 1, 3, 2)),
             helper.make_node("Mul", ["qt", "c"], ["qs"]), helper.make_node("Mul", ["ktt", "c"], ["kts"]),
             helper.make_node("MatMul", ["qs", "kts"], ["qk"]), helper.make_node("Softmax", ["qk"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "vt"], ["o"]), helper.make_node("Reshape", ["o", "target"], ["o2"]),
             t("o2", "y")]
    outputs = [_vi("y", None), _vi("qshape", None, TensorProto.INT64)]
    if also_read:
        nodes.append(helper.make_node("Neg", ["o"], ["z"]))
        outputs.append(_vi("z", None))
    inputs = [_vi(n, [b, s, h, d]) for n in "qkv"]
    return _model(nodes, inputs, outputs, opset=18)


@pytest.mark.parametrize("also_read", [False, True])
def test_attention_between_heads_last_transposes_runs_in_that_layout(also_read):
    model = _heads_last_model(also_read=also_read)
    feeds = {n: RNG.standard_normal((2, 5, 2, 4)).astype(np.float32) for n in "qkv"}
    prog = _check(model, feeds, "ScaledDotProductAttention", "Softmax")
    (fused,) = [ctx for ctx, _, _ in prog.steps if ctx.node.op_type == "ScaledDotProductAttention"]
    # The four transposes go (q's stays for its Shape, which folds at import:
    # nothing reads it, so the plan never runs it).
    assert fused.attr("bshd") == (0 if also_read else 1)
    (entry,) = prog._compiled._entries.values()
    read = entry.session.graph._consumers()
    assert any(op.type == "Transpose" and op in read for op in entry.session.graph.get_operations()) == also_read


def test_attention_with_a_causal_mask_built_from_run_time_shapes_is_fused():
    # Llama exported with dynamic axes: the causal mask is computed from the
    # sequence lengths at run time (unknown at import), but its Trilu keeps key 0
    # for every row, so the fused op (which gives zeros where ONNX gives NaN) is safe.
    d = 4
    c = np.float32(d ** -0.25)
    nodes = [_c("c", c), _c("one", np.array([1.0], np.float32)), _c("zero", np.array([0.0], np.float32)),
             _c("ninf", np.array([-np.inf], np.float32)), _c("b2", np.array([2], np.int64)),
             _c("e3", np.array([3], np.int64)),
             helper.make_node("Shape", ["q"], ["sq0"]), helper.make_node("Shape", ["k"], ["sk0"]),
             helper.make_node("Slice", ["sq0", "b2", "e3"], ["sq"]),
             helper.make_node("Slice", ["sk0", "b2", "e3"], ["sk"]),
             helper.make_node("Concat", ["sq", "sk"], ["ms"], axis=0),
             helper.make_node("Expand", ["one", "ms"], ["ex"]), helper.make_node("Trilu", ["ex"], ["tri"], upper=0),
             helper.make_node("Equal", ["tri", "zero"], ["eq"]),
             helper.make_node("Where", ["eq", "ninf", "zero"], ["mask"]),
             helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("Mul", ["q", "c"], ["qs"]), helper.make_node("Mul", ["kt", "c"], ["kts"]),
             helper.make_node("MatMul", ["qs", "kts"], ["qk"]), helper.make_node("Add", ["qk", "mask"], ["sm_in"]),
             helper.make_node("Softmax", ["sm_in"], ["p"], axis=-1), helper.make_node("MatMul", ["p", "v"], ["y"])]
    model = _model(nodes, [_vi(n, ["b", 2, "s", d]) for n in "qkv"], [_vi("y", None)], opset=18)
    prog = opforge.onnx.load(model)
    assert "ScaledDotProductAttention" in _types(prog) and "Softmax" not in _types(prog)
    for b, s_ in ((1, 3), (2, 6), (2, 6)):
        feeds = {n: RNG.standard_normal((b, 2, s_, d)).astype(np.float32) for n in "qkv"}
        np.testing.assert_allclose(prog.run(feeds)[0], _ort(model, feeds)[0], rtol=1e-5, atol=1e-5)
    assert prog._compiled.generic_reason() is None
    ops = {op.type for op in prog._compiled._generic.session.graph.get_operations()}
    assert "ScaledDotProductAttention" in ops and "Softmax" not in ops


def test_tanh_gelu_as_gpt2_exports_it_becomes_one_step():
    k = np.float32(np.sqrt(2 / np.pi))
    nodes = [_c("half", np.float32(0.5)), _c("three", np.float32(3)), _c("c", np.float32(0.044715)),
             _c("k", k), _c("one", np.float32(1)),
             helper.make_node("Mul", ["x", "half"], ["m0"]), helper.make_node("Pow", ["x", "three"], ["p"]),
             helper.make_node("Mul", ["p", "c"], ["m1"]), helper.make_node("Add", ["x", "m1"], ["a"]),
             helper.make_node("Mul", ["a", "k"], ["m2"]), helper.make_node("Tanh", ["m2"], ["t"]),
             helper.make_node("Add", ["t", "one"], ["a1"]), helper.make_node("Mul", ["m0", "a1"], ["y"])]
    model = _model(nodes, [_vi("x", [4, 32])], [_vi("y", None)])
    x = (RNG.standard_normal((4, 32)) * 4).astype(np.float32)
    prog = _check(model, {"x": x}, "Gelu", "Tanh")
    assert "Tanh" not in _graph_ops(prog) and "Pow" not in _graph_ops(prog) and "GeluTanh" in _graph_ops(prog)
    # A wrong constant (0.04 for 0.044715) is another function: left alone.
    nodes[2] = _c("c", np.float32(0.04))
    _check(_model(nodes, [_vi("x", [4, 32])], [_vi("y", None)]), {"x": x}, "Tanh", "Gelu")


def _rotary_model(d=8, cos_shape=(1, 1, 5, 8), axis=3, cat_axis=-1, shared=False):
    """Hugging Face's apply_rotary_pos_emb as torch.onnx exports it (Llama)."""
    h = d // 2
    big = np.iinfo(np.int64).max
    nodes = [_c("s0", np.array([0])), _c("sh", np.array([h])), _c("end", np.array([big])),
             _c("ax", np.array([axis])), _c("one", np.array([1])),
             helper.make_node("Slice", ["x", "s0", "sh", "ax", "one"], ["x1"]),
             helper.make_node("Slice", ["x", "sh", "end", "ax", "one"], ["x2"]),
             helper.make_node("Neg", ["x2"], ["n"]),
             helper.make_node("Concat", ["n", "x1"], ["r"], axis=cat_axis),
             helper.make_node("Mul", ["x", "cos"], ["xc"]), helper.make_node("Mul", ["r", "sin"], ["rs"]),
             helper.make_node("Add", ["xc", "rs"], ["y"])]
    outputs = [_vi("y", None)] + ([_vi("r", None)] if shared else [])
    return _model(nodes, [_vi("x", [2, 3, 5, d]), _vi("cos", list(cos_shape)), _vi("sin", list(cos_shape))], outputs)


def _rotary_feeds(d=8, cos_shape=(1, 1, 5, 8)):
    return {"x": RNG.standard_normal((2, 3, 5, d)).astype(np.float32),
            "cos": RNG.standard_normal(cos_shape).astype(np.float32),
            "sin": RNG.standard_normal(cos_shape).astype(np.float32)}


@pytest.mark.parametrize("cos_shape", [(1, 1, 5, 8), (2, 1, 5, 8), (5, 8)])
def test_rotary_embedding_as_llama_exports_it_becomes_one_op(cos_shape):
    prog = _check(_rotary_model(cos_shape=cos_shape), _rotary_feeds(cos_shape=cos_shape),
                  "ApplyRotaryEmbedding", "Neg")
    assert "ApplyRotaryEmbedding" in _graph_ops(prog) and "Concat" not in _graph_ops(prog)


@pytest.mark.parametrize("divisor", [2, 4])
def test_rotary_with_halves_computed_from_the_shape_is_fused_in_the_graph_for_every_size(divisor):
    # Exported with dynamic axes, the split is x.shape[-1] // 2 computed at run
    # time (Shape -> Gather -> Div -> Unsqueeze); its value is known at import
    # (the head dim is static), so the one graph for every size runs the fused op.
    # divisor 4: the bounds do not halve the last axis: refused, the original nodes run.
    model = _rotary_model(cos_shape=("s", 8))
    nodes = [n for n in model.graph.node if n.output[0] != "sh"]
    nodes[:0] = [_c("last", np.array(3)), _c("two", np.array(divisor)), _c("zero1", np.array([0])),
                 helper.make_node("Shape", ["x"], ["shp"]), helper.make_node("Gather", ["shp", "last"], ["dim"]),
                 helper.make_node("Div", ["dim", "two"], ["half"]),
                 helper.make_node("Unsqueeze", ["half", "zero1"], ["sh"])]
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    for vi in model.graph.input:
        if vi.name == "x":
            vi.CopyFrom(_vi("x", ["b", 3, "s", 8]))
    prog = opforge.onnx.load(model)
    assert "ApplyRotaryEmbedding" in _types(prog)
    for b, s_ in ((2, 5), (1, 7), (1, 7)):
        feeds = {"x": RNG.standard_normal((b, 3, s_, 8)).astype(np.float32),
                 "cos": RNG.standard_normal((s_, 8)).astype(np.float32),
                 "sin": RNG.standard_normal((s_, 8)).astype(np.float32)}
        np.testing.assert_allclose(prog.run(feeds)[0], _ort(model, feeds)[0], rtol=1e-5, atol=1e-5)
    assert prog._compiled.generic_reason() is None
    graph = prog._compiled._generic.session.graph
    read = {op.type for op in graph._consumers()}  # (the dead shape arithmetic left aside)
    ops = {op.type for op in graph.get_operations()}
    assert ("ApplyRotaryEmbedding" in ops) == (divisor == 2) and ("StridedSlice" in read) == (divisor != 2)


def test_rotary_that_does_not_halve_the_last_axis_runs_unfused():
    # Split at 4 of a last dim of 10: the pattern matches at import, the fused
    # converter refuses it at run time, and the original nodes run.
    model = _rotary_model(d=10, cos_shape=(10,))
    for node in model.graph.node:
        if node.output[0] == "sh":
            node.attribute[0].t.CopyFrom(numpy_helper.from_array(np.array([4])))
    feeds = _rotary_feeds(d=10, cos_shape=(10,))
    prog = opforge.onnx.load(model)
    assert "ApplyRotaryEmbedding" in _types(prog)
    want = _ort(model, feeds)
    for _ in range(2):
        np.testing.assert_allclose(prog.run(feeds)[0], want[0], rtol=1e-5, atol=1e-5)


def test_rotary_whose_rotated_half_is_also_an_output_is_left_alone():
    prog = _check(_rotary_model(shared=True), _rotary_feeds(), "Neg", "ApplyRotaryEmbedding")
    assert "ApplyRotaryEmbedding" not in _graph_ops(prog)
