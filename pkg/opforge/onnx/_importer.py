"""Turns a checked ONNX graph into calls of opforge's op wrappers.

`Program` holds what import checked once (initializers decoded, nodes in
topological order, each with its converter); `Program.run` walks the nodes
eagerly, and `Program.build` walks them inside an opforge Graph. Both use
the same converters, so the answer does not depend on the mode.
"""

import numpy as np

from opforge import errors
from opforge.onnx import _functions, _node, _opset, _validate
from opforge.onnx import _ops_elementwise, _ops_nn, _ops_optional, _ops_shape  # noqa: F401  (register converters)
from opforge.onnx import _ops_conv  # noqa: F401,E402  (conv, pool, batch norm)
from opforge.onnx import _ops_math, _ops_math_more, _ops_index  # noqa: F401  (register converters)
from opforge.onnx import _fuse_matmul  # noqa: E402  (MatMul -> Add -> activation as FusedMatMul)
from opforge.onnx import _ops_select, _ops_compose, _ops_attention  # noqa: F401,E402  (index, composed, attention)
from opforge.onnx import _ops_quant  # noqa: F401,E402  (quantization operators)


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
        graph = model.graph
        self.initializers = {}
        for t in graph.initializer:
            if t.name in self.initializers:
                raise errors.InvalidArgumentError(f"onnx: initializer {t.name!r} is defined twice")
            self.initializers[t.name] = _validate.tensor_to_numpy(t, f"initializer {t.name!r}")
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
        self.steps = []
        for node in order:
            i = index[id(node)]
            conv, version = _node.check_supported(node, self.opset, i)
            ctx = _node.NodeCtx(node, version, {}, i)
            if conv.check is not None:
                conv.check(ctx)
            outputs = [(k, name) for k, name in enumerate(node.output) if name]
            self.steps.append((ctx, conv.fn, outputs))
        _ops_conv.fold_batch_norm(self)  # Conv + inference BatchNormalization -> one Conv
        self.steps = _ops_quant.fuse_dynamic_quant(self.steps, set(self.outputs))  # quantize_dynamic Linears
        self.steps = _fuse_matmul.fuse_matmul_chains(self.steps, set(self.outputs))
        self.steps = _ops_nn.fuse_activations(self.steps, set(self.outputs))

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
        for proto_ctx, fn, outputs in self.steps:
            ctx = proto_ctx.bind(env, consts)
            try:
                result = fn(ctx)
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
            for k, name in outputs:
                if k >= len(results):
                    raise errors.UnimplementedError(
                        f"onnx: node {ctx.where}: output {k} ({name!r}) is not supported")
                env[name] = results[k]
        return env

    def run(self, feeds):
        """Runs the model eagerly; returns the outputs as numpy arrays, in the model's order."""
        env = dict(self.initializers)
        fed = self.check_feeds(feeds)
        env.update(fed)
        self.evaluate(env)
        # Reshape and Identity share buffers: never hand out a view of the
        # model's weights or of a feed, which the caller might then modify.
        owned = list(fed.values()) + list(self.initializers.values())
        results = []
        for name, (dtype, _) in self.outputs.items():
            v = env[name]
            a = v if isinstance(v, np.ndarray) else v.numpy()
            if any(np.may_share_memory(a, o) for o in owned):
                a = a.copy()
            if dtype is not None and a.dtype != dtype:
                raise errors.InternalError(
                    f"onnx: output {name!r} came out {a.dtype}, but the model declares {dtype}")
            results.append(a)
        return results
