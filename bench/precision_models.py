"""The model rows of bench.precision (issue 25): a float16 ResNet-18 and a
dynamically quantized tiny BERT, each run by opforge (Session.run of the
imported graph) and by onnxruntime, interleaved in one process.

- ResNet-18: torchvision's resnet18 (random init, eval) exported in float32,
  then converted to float16 (every float initializer, Constant, input and
  output; what onnxconverter's float16 conversion does without keep_io_types).
  Match: relative 1e-2 of the largest logit.
- BERT: a tiny transformers BertModel (2 layers, hidden 128, 2 heads,
  intermediate 512, random init) exported, then
  onnxruntime.quantization.quantize_dynamic (QInt8 weights). Match: the
  last hidden state within one quantization step (max |y| / 127).

Needs torch, torchvision (ResNet) and transformers (BERT); without them the
row says so. Called from bench.precision (--only resnet,bert).
"""
import io
import os

import numpy as np

from bench import timing


def _load():
    try:
        return "load average %.1f %.1f %.1f" % os.getloadavg()
    except OSError:
        return "load average unknown"


def to_float16(model):
    """model with every float32 tensor (initializers, Constant nodes, inputs, outputs) in float16."""
    import onnx
    from onnx import TensorProto, numpy_helper
    m = onnx.ModelProto()
    m.CopyFrom(model)

    def conv(t):
        if t.data_type == TensorProto.FLOAT:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16), t.name))
    for t in m.graph.initializer:
        conv(t)
    for node in m.graph.node:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.TENSOR:
                conv(a.t)
        if node.op_type == "Cast":
            for a in node.attribute:
                if a.name == "to" and a.i == TensorProto.FLOAT:
                    a.i = TensorProto.FLOAT16
    for vi in list(m.graph.input) + list(m.graph.output) + list(m.graph.value_info):
        if vi.type.tensor_type.elem_type == TensorProto.FLOAT:
            vi.type.tensor_type.elem_type = TensorProto.FLOAT16
    return m


def _compare(name, model, feeds, repeats, settle, threads, cpu, match):
    """Runs both libraries; returns (row text)."""
    import onnxruntime as ort

    import opforge as of
    import opforge.onnx
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)[0]
    try:
        imported = opforge.onnx.import_model(model)
        gsess = of.Session(imported.graph)
        out = [imported.outputs[model.graph.output[0].name]]
        gfeeds = {imported.inputs[k]: v for k, v in feeds.items()}
        got = np.asarray(gsess.run(out, gfeeds)[0])
    except of.errors.OpError as e:
        return f"  {name:<10} opforge fails: {str(e)[:300]}"
    ok, how = match(got.astype(np.float32), want.astype(np.float32))
    ns = {"sess": sess, "feeds": feeds, "gsess": gsess, "gy": out, "gfeeds": gfeeds}
    stmts = {"onnxruntime": "sess.run(None, feeds)", "opforge": "gsess.run(gy, gfeeds)"}
    import time
    timer = time.process_time if cpu else time.perf_counter
    med = {k: timing.summarize(v)["median_s"] for k, v in
           timing.interleaved(stmts, ns, repeats, 0.05, settle_s=settle, timer=timer).items()}
    return (f"  {name:<10} onnxruntime {med['onnxruntime'] * 1e3:8.2f} ms  opforge {med['opforge'] * 1e3:8.2f} ms  "
            f"ort/opforge {med['onnxruntime'] / med['opforge']:5.2f}x (target >= 1.0)  match: {how}: "
            f"{'yes' if ok else 'NO'}")


def _relative(got, want):
    err, tol = float(np.abs(got - want).max()), 1e-2 * float(np.abs(want).max())
    return err <= tol, f"max |diff| {err:.2e} <= 1e-2 * max|y| ({tol:.2e})"


def _one_step(got, want):
    err, step = float(np.abs(got - want).max()), float(np.abs(want).max()) / 127
    return err <= step, f"max |diff| {err:.2e} <= one step ({step:.2e})"


def _clock(cpu, repeats):
    return f"median of {repeats}, {'process CPU time, one thread each' if cpu else 'wall time'}, {_load()}"


def resnet_case(repeats, settle, threads, cpu, quick):
    try:
        from bench.vision_models import _import_torchvision
        torch, torchvision = _import_torchvision()
        import onnx  # noqa: F401
    except ImportError as e:
        print(f"float16 ResNet-18: skipped ({e})")
        return None
    size = 64 if quick else 224
    torch.manual_seed(0)
    net = torchvision.models.resnet18(weights=None).eval()
    x = torch.randn(1, 3, size, size)
    buf = io.BytesIO()
    torch.onnx.export(net, (x,), buf, opset_version=17, input_names=["x"], output_names=["y"], dynamo=False)
    import onnx
    model = to_float16(onnx.load_from_string(buf.getvalue()))
    row = _compare("resnet18", model, {"x": x.numpy().astype(np.float16)}, repeats, settle, threads, cpu, _relative)
    print(f"float16 ResNet-18 (torchvision, exported then converted), 1x3x{size}x{size}, {_clock(cpu, repeats)}")
    print(row)
    return row


def bert_case(repeats, settle, threads, cpu, quick):
    try:
        from bench.vision_models import _import_torchvision
        _import_torchvision()  # transformers imports torchvision when present: a CUDA-only wheel needs the stub
    except (ImportError, RuntimeError):
        pass
    try:
        import torch
        import transformers
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as e:
        print(f"int8 BERT: skipped ({e})")
        return None
    import tempfile

    import onnx
    seq = 32 if quick else 128
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=1000, hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=512, max_position_embeddings=512)
    bert = transformers.BertModel(cfg).eval()

    class Hidden(torch.nn.Module):  # keyword arguments and one output, for the TorchScript exporter
        def __init__(self):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.bert(input_ids=input_ids, attention_mask=attention_mask,
                             token_type_ids=token_type_ids).last_hidden_state
    net = Hidden().eval()
    ids = torch.randint(0, 1000, (1, seq))
    mask = torch.ones(1, seq, dtype=torch.int64)
    types = torch.zeros(1, seq, dtype=torch.int64)  # given, so the export has no Expand of a buffer
    with tempfile.TemporaryDirectory() as tmp:
        f32, q8 = os.path.join(tmp, "bert.onnx"), os.path.join(tmp, "bert_int8.onnx")
        with torch.no_grad():
            torch.onnx.export(net, (ids, mask, types), f32, opset_version=17,
                              input_names=["input_ids", "attention_mask", "token_type_ids"],
                              output_names=["last_hidden_state"], dynamo=False)
        quantize_dynamic(f32, q8, weight_type=QuantType.QInt8)
        model = onnx.load(q8)
    feeds = {"input_ids": ids.numpy(), "attention_mask": mask.numpy(), "token_type_ids": types.numpy()}
    row = _compare("bert-tiny", model, feeds, repeats, settle, threads, cpu, _one_step)
    print(f"int8 BERT (transformers tiny config, quantize_dynamic), 1x{seq} tokens, {_clock(cpu, repeats)}")
    print(row)
    return row
