"""opforge as an `onnx.backend.base.Backend`, so onnx's backend test suite can drive it.

    >>> import opforge.onnx.backend as backend
    >>> rep = backend.prepare(model)            # checks and maps the model once
    >>> outputs = rep.run([x])                  # tuple of numpy arrays
"""

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep, namedtupledict

from opforge.onnx._importer import Program
from opforge.onnx._node import CONVERTERS, schema_version
from opforge.onnx import _validate


class OpforgeRep(BackendRep):
    def __init__(self, program):
        self.program = program

    def run(self, inputs, **kwargs):
        if isinstance(inputs, np.ndarray):
            inputs = [inputs]
        outputs = self.program.run(inputs)
        return namedtupledict("Outputs", list(self.program.outputs))(*outputs)


class OpforgeBackend(Backend):
    @classmethod
    def is_compatible(cls, model, device="CPU", **kwargs):
        try:
            Program(model)
        except Exception:  # noqa: BLE001 -- compatibility is a yes/no question
            return False
        return cls.supports_device(device)

    @classmethod
    def prepare(cls, model, device="CPU", **kwargs):
        if not cls.supports_device(device):
            raise RuntimeError(f"opforge runs on CPU only, not {device!r}")
        return OpforgeRep(Program(model))

    @classmethod
    def run_model(cls, model, inputs, device="CPU", **kwargs):
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node, inputs, device="CPU", outputs_info=None, **kwargs):
        # A one-node model at the current opset; input types come from the values.
        from onnx import helper
        from opforge.onnx import _dtypes
        arrays = [np.asarray(x) for x in inputs]
        graph_inputs = [helper.make_tensor_value_info(name, _dtypes.BY_NUMPY[a.dtype], a.shape)
                        for name, a in zip(node.input, arrays) if name]
        graph_outputs = [helper.make_empty_tensor_value_info(name) for name in node.output if name]
        model = helper.make_model(helper.make_graph([node], "node", graph_inputs, graph_outputs))
        feeds = {name: a for name, a in zip(node.input, arrays) if name}
        prog = Program(model)
        return prog.run(feeds)

    @classmethod
    def supports_device(cls, device):
        return str(device).upper().startswith("CPU")


prepare = OpforgeBackend.prepare
run_model = OpforgeBackend.run_model
run_node = OpforgeBackend.run_node
supports_device = OpforgeBackend.supports_device
is_compatible = OpforgeBackend.is_compatible
