"""Turns a checked ONNX graph into calls of opforge's op wrappers.

`Program` holds what import checked once (initializers decoded, nodes in
topological order, each with its converter); `Program.run` walks the nodes
eagerly, and `Program.build` walks them inside an opforge Graph. Both use
the same converters, so the answer does not depend on the mode.
"""

import numpy as np

from opforge import errors
from opforge.onnx import _compile, _functions, _node, _opset, _rewrite, _shape_values, _validate
from opforge.onnx import _ops_elementwise, _ops_nn, _ops_optional, _ops_shape  # noqa: F401  (register converters)
from opforge.onnx import _ops_conv  # noqa: F401,E402  (conv, pool, batch norm)
from opforge.onnx import _pack_conv  # noqa: E402  (Conv filters packed once per Program)
from opforge.onnx import _fuse_concat  # noqa: E402  (Concat of packed convs written in place)
from opforge.onnx import _nchwc_pass  # noqa: E402  (the NCHWc layout of conv regions)
from opforge.onnx import _ops_math, _ops_math_more, _ops_index  # noqa: F401  (register converters)
from opforge.onnx import _fuse_matmul  # noqa: E402  (MatMul -> Add -> activation as FusedMatMul)
from opforge.onnx import _half_compute  # noqa: E402  (float16 conv nets computed in float32)
from opforge.onnx import _ops_select, _ops_compose, _ops_attention  # noqa: F401,E402  (index, composed, attention)
from opforge.onnx import _ops_quant  # noqa: F401,E402  (quantization operators)
from opforge.onnx import _ops_shape_dyn  # noqa: F401,E402  (last: wraps Expand, Tile, Range, ConstantOfShape)


def _has_unknown_dims(v):
    shape = getattr(v, "shape", None)
    return shape is not None and any(d is None for d in shape)


def _check_all_mapped(nodes):
    """Raises one UnimplementedError naming every operator the map lacks, not just the first.

    Each operator comes with its node count and the first node using it, so
    a user sees the whole gap of a model in one import.
    """
    missing = {}  # op_type (with its domain if not ONNX's) -> [count, first node's description]
    for i, node in enumerate(nodes):
        default = node.domain in ("", "ai.onnx")
        if default and node.op_type in _node.CONVERTERS:
            continue
        key = node.op_type if default else f"{node.op_type} (domain {node.domain!r})"
        entry = missing.setdefault(key, [0, _validate.describe(node, i)])
        entry[0] += 1
    if not missing:
        return
    if len(missing) == 1 and next(iter(missing.values()))[0] == 1:
        (key, (_, where)), = missing.items()
        err = errors.UnimplementedError(f"onnx: node {where}: operator {key} is not supported by opforge")
    else:
        listed = "; ".join(f"{key} x{count} (e.g. node {where})" for key, (count, where) in missing.items())
        err = errors.UnimplementedError(
            f"onnx: {len(missing)} operators used by {sum(c for c, _ in missing.values())} nodes are not "
            f"supported by opforge: {listed}")
    err.unsupported_operators = {key: (count, where) for key, (count, where) in missing.items()}
    raise err


class Program:
    """An imported model: validated and mapped, ready to run or to build into a graph."""

    def __init__(self, model_or_path):
        model = _validate.load(model_or_path)
        self.opset = _validate.default_opset(model)
        model, self.opset = _opset.upgrade(model, self.opset)  # old opsets via onnx.version_converter
        model = _functions.expand(model, self.opset)  # unmapped operators that are ONNX functions
        model = _half_compute.compute_in_float32(model)  # float16 conv nets: float32 between the edges
        graph = model.graph
        self.initializers = {}
        for t in graph.initializer:
            if t.name in self.initializers:
                raise errors.InvalidArgumentError(f"onnx: initializer {t.name!r} is defined twice")
            self.initializers[t.name] = _validate.tensor_to_numpy(t, f"initializer {t.name!r}")
        _half_compute.widen_initializers(model, self.initializers)  # float16 weights of a float32-computed net
        if len(graph.sparse_initializer):
            raise errors.UnimplementedError("onnx: sparse initializers are not supported")
        self.inputs = {}  # name -> (numpy dtype, dims or None); those the caller feeds
        for vi in graph.input:
            dtype, dims = _validate.value_info_type(vi, "graph input")
            if vi.name in self.inputs:
                raise errors.InvalidArgumentError(f"onnx: graph input {vi.name!r} is listed twice")
            if vi.name not in self.initializers:  # IR < 4 lists initializers as inputs too
                self.inputs[vi.name] = (dtype, dims)
        self.outputs = {}
        for vi in graph.output:
            self.outputs[vi.name] = _validate.value_info_type(vi, "graph output", allow_untyped=True)
        _check_all_mapped(graph.node)
        order = _validate.check_graph(graph, list(self.inputs) + list(self.initializers))
        index = {id(node): i for i, node in enumerate(graph.node)}
        for node in order:  # every node as the model wrote it is checked, rewritten or not
            _node.check_supported(node, self.opset, index[id(node)])
        order, synthetic = _rewrite.rewrite(order, self.initializers, self.outputs, self.opset)
        self.steps = [self._step(node, index, synthetic) for node in order]
        _ops_conv.fold_batch_norm(self)  # Conv + inference BatchNormalization -> one Conv
        _nchwc_pass.rewrite(self, model)  # conv regions in the blocked channel layout (_layout_nchwc.mode)
        _ops_conv.fuse_conv_residuals(self)  # NCHW Conv -> Add [-> Relu] as one step (NCHWc fused its own)
        _pack_conv.pack_filters(self, model)  # float32 Conv filters packed once; weights only they read dropped
        _fuse_concat.fuse(self)  # Concat of packed convs over one input: each conv writes its channel slice
        self.steps = _ops_quant.fuse_dynamic_quant(self.steps, set(self.outputs))  # quantize_dynamic Linears
        self.steps = _fuse_matmul.fuse_matmul_chains(self.steps, set(self.outputs))
        self.steps = _ops_nn.fuse_activations(self.steps, set(self.outputs))
        self._compiled = _compile.CompileCache()
        self._folds = {}  # id(step ctx) -> its folded value, for values of the weights alone
        self._weights = _compile.Owned(self.initializers.values())

    def _step(self, node, index, synthetic):
        """(ctx, converter, outputs) of a node; a rewrite's node runs its replaced nodes where it refuses."""
        i = index.get(id(node))
        syn = synthetic.get(id(node))
        if syn is None:
            conv, version = _node.check_supported(node, self.opset, i)
            fn, check = conv.fn, conv.check
        else:
            conv = _node.CONVERTERS.get(node.op_type)
            fn, version, check = syn.fn, syn.version, conv.check if conv is not None else None
        ctx = _node.NodeCtx(node, version, {}, i)
        if check is not None:
            check(ctx)
        if syn is not None:
            fn = _rewrite.guarded(fn, [self._step(n, index, {}) for n in syn.originals])
        return ctx, fn, [(k, name) for k, name in enumerate(node.output) if name]

    use_graph = True  # Program.run on the graph engine (False: the eager node loop only)

    def compiled_reasons(self):
        """Feed-shape signature -> None (runs as a graph) or why it runs eagerly."""
        return self._compiled.reasons()

    def check_feeds(self, feeds):
        """Feeds as numpy arrays, checked against the declared inputs' dtypes and dims."""
        if not isinstance(feeds, dict):
            feeds = list(feeds)
            if len(feeds) != len(self.inputs):
                raise errors.InvalidArgumentError(
                    f"onnx: the model has {len(self.inputs)} inputs {list(self.inputs)}, got {len(feeds)} values")
            feeds = dict(zip(self.inputs, feeds))
        unknown = set(feeds) - set(self.inputs)
        if unknown:
            raise errors.InvalidArgumentError(
                f"onnx: {sorted(unknown)} are not inputs of the model (inputs: {list(self.inputs)})")
        out = {}
        for name, (dtype, dims) in self.inputs.items():
            if name not in feeds:
                raise errors.InvalidArgumentError(f"onnx: no value fed for model input {name!r}")
            v = feeds[name]
            if isinstance(v, np.ndarray):
                a = v
            elif type(v).__name__ == "TensorProto":
                a = _validate.tensor_to_numpy(v, f"input {name!r}")
            elif hasattr(v, "numpy"):
                a = np.asarray(v.numpy())
            else:
                a = np.asarray(v)
            if a.dtype != dtype:
                raise errors.InvalidArgumentError(
                    f"onnx: input {name!r} must be {dtype}, got {a.dtype} (opforge does not cast feeds)")
            if dims is not None and (a.ndim != len(dims) or any(
                    d is not None and d != s for d, s in zip(dims, a.shape))):
                want = ["?" if d is None else d for d in dims]
                raise errors.InvalidArgumentError(
                    f"onnx: input {name!r} must have shape {want}, got {list(a.shape)}")
            out[name] = a
        return out

    def evaluate(self, env, consts=None):
        """Runs every node's converter over env (name -> value), in order; returns env.

        consts: numpy values of names whose env entry is a graph constant.
        """
        # Values computed from the weights alone are folded once per Program
        # and shared by every compiled signature (a transposed embedding is
        # not copied per signature); those that read a feed's shape are not.
        weights_only = set(self.initializers)
        partials = {} if consts is not None else None  # graph mode: entries of run-time shape tensors
        for proto_ctx, fn, outputs in self.steps:
            folded = consts is not None and _compile.foldable(proto_ctx.node, consts)
            shared = folded and all(k in weights_only for k in proto_ctx.node.input if k)
            if folded:  # every input known at import: compute it now, eagerly, as a constant
                ctx = proto_ctx.bind({k: consts[k] for k in proto_ctx.node.input if k}, consts)
            else:
                ctx = proto_ctx.bind(env, consts, partials)
            try:
                if shared and id(proto_ctx) in self._folds:
                    result = self._folds[id(proto_ctx)]
                elif folded:
                    with _compile.eager():
                        result = _compile.to_numpy(fn(ctx))
                    if shared:
                        self._folds[id(proto_ctx)] = result
                else:
                    result = fn(ctx)
                if shared:
                    weights_only.update(name for _, name in outputs)
            except errors.OpError as e:
                msg = str(e)
                if msg.startswith("onnx:"):
                    raise
                raise type(e)(f"onnx: node {ctx.where}: {msg}") from e
            except TypeError as e:
                # A converter did arithmetic on a dim that is None: one it
                # needs statically, from a symbolic input dim.
                unknown = [k for k in proto_ctx.node.input if k and _has_unknown_dims(env.get(k))]
                if not unknown:
                    raise
                raise errors.UnimplementedError(
                    f"onnx: node {ctx.where} needs the static shape of input {unknown[0]!r}, whose dims "
                    f"{list(env[unknown[0]].shape)} depend on a symbolic model input: fix those with "
                    "import_model(..., input_shapes={...})") from None
            results = result if isinstance(result, tuple) else (result,)
            if partials is not None and not folded:
                _shape_values.propagate(ctx, results, partials)
            for k, name in outputs:
                if k >= len(results):
                    raise errors.UnimplementedError(
                        f"onnx: node {ctx.where}: output {k} ({name!r}) is not supported")
                env[name] = results[k]
                if consts is not None and isinstance(results[k], np.ndarray):
                    consts[name] = results[k]  # known at import (folded, or Shape of static dims)
        return env

    def run(self, feeds):
        """Runs the model; returns the outputs as numpy arrays, in the model's order.

        On the graph engine, one compiled graph per signature of feed shapes,
        from the second run of a signature on (_compile.py); eagerly, node by
        node, on a signature's first run, where a graph cannot express the
        model (see `compiled_reasons`) or where the graph's run fails (so
        errors name the ONNX node as the eager run does).
        """
        fed = self.check_feeds(feeds)
        values = None
        if self.use_graph:
            entry = self._compiled.get(self, fed)
            if isinstance(entry, _compile.Compiled):
                try:
                    values = entry.run(fed)
                except errors.OpError:
                    values = None  # the eager run below raises the error, naming the node
        # The engine copies a fetched value that shares a feed's or a
        # constant's memory (graph.cc, Unshare); the eager loop does not.
        eager = values is None
        if eager:
            env = dict(self.initializers)
            env.update(fed)
            self.evaluate(env)
            values = [env[name] for name in self.outputs]
        results = []
        for v, (name, (dtype, _)) in zip(values, self.outputs.items()):
            a = v if isinstance(v, np.ndarray) else v.numpy()
            # Reshape and Identity share buffers: never hand out a view of the
            # model's weights or of a feed, which the caller might then modify.
            if eager and (self._weights.overlaps(a) or any(np.may_share_memory(a, o) for o in fed.values())):
                a = a.copy()
            if dtype is not None and a.dtype != dtype:
                raise errors.InternalError(
                    f"onnx: output {name!r} came out {a.dtype}, but the model declares {dtype}")
            results.append(a)
        return results
