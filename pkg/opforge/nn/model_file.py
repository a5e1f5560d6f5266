"""Model files: safetensors with the layer config in the metadata.

Writing uses the `safetensors` package (numpy API), imported only here and
only when saving. Reading parses the format itself, because the file is
untrusted: every header field is checked before any byte is used, and the
tensors are views of a private (copy-on-write) memory map, so loading copies
nothing and training a loaded model never writes to the file.
"""

import json
import os
import struct

import numpy as np

from opforge import errors as _errors

CONFIG_KEY = "opforge_config"
_DTYPES = {"F32": np.float32, "F64": np.float64, "I32": np.int32, "I64": np.int64, "BOOL": np.bool_,
           "F16": np.float16, "BF16": "bfloat16", "I8": np.int8, "U8": np.uint8, "I16": np.int16, "U16": np.uint16,
           "U32": np.uint32, "U64": np.uint64}


def _np_dtype(code):
    """numpy's dtype for a safetensors dtype code; BF16 is ml_dtypes' (imported here, on demand)."""
    if code == "BF16":
        from opforge import dtypes
        return dtypes.bfloat16.as_numpy_dtype
    return np.dtype(_DTYPES[code])


def _write_raw(arrays, path, metadata):
    """A safetensors file written directly (safetensors' numpy API has no bfloat16)."""
    codes = {np.dtype(v): k for k, v in _DTYPES.items() if k != "BF16"}
    header, offset = {"__metadata__": metadata}, 0
    for name in sorted(arrays):
        a = arrays[name]
        code = "BF16" if a.dtype.kind == "V" and a.dtype.type.__name__ == "bfloat16" else codes[a.dtype]
        header[name] = {"dtype": code, "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for name in sorted(arrays):
            f.write(arrays[name].tobytes())
_MAX_HEADER = 100 << 20


def _bad(path, why):
    return _errors.InvalidArgumentError(f"model file {os.fspath(path)!s}: {why}")


def save(layer, path):
    try:
        from safetensors.numpy import save_file
    except ImportError as e:
        raise ImportError("saving a model needs the safetensors package: pip install safetensors (or the checkout's extra: pip install \".[train]\")") from e
    arrays = {name: np.ascontiguousarray(w.numpy()) for name, w in layer.named_weights()}
    meta = {CONFIG_KEY: json.dumps(layer.get_config(), sort_keys=True), "format": "np"}
    tmp = f"{os.fspath(path)}.tmp{os.getpid()}"
    try:
        if any(a.dtype.kind == "V" for a in arrays.values()):  # bfloat16
            _write_raw(arrays, tmp, meta)
        else:
            save_file(arrays, tmp, metadata=meta)
        os.replace(tmp, path)  # a crash mid-write never leaves a half file at `path`
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _header(path, f, size):
    if size < 8:
        raise _bad(path, f"truncated: {size} bytes, shorter than the 8-byte header length")
    (n,) = struct.unpack("<Q", f.read(8))
    if n > size - 8 or n > _MAX_HEADER:
        raise _bad(path, f"header length {n} exceeds the file ({size} bytes): truncated or not safetensors")
    try:
        header = json.loads(f.read(n).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise _bad(path, f"the header is not valid JSON: {e}") from None
    if not isinstance(header, dict):
        raise _bad(path, "the header is not a JSON object")
    return n, header


def read_weights(path):
    """({name: ndarray}, metadata dict) from a safetensors file, zero-copy; raises on any inconsistency."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            n, header = _header(path, f, size)
    except OSError as e:
        raise _errors.NotFoundError(f"model file {path}: cannot read it: {e.strerror}") from None
    meta = header.pop("__metadata__", None) or {}
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise _bad(path, "__metadata__ must map strings to strings")
    start, data_len = 8 + n, size - 8 - n
    spans, out = [], {}
    for name, info in header.items():
        if not isinstance(info, dict):
            raise _bad(path, f"weight {name!r}: its entry is not an object")
        dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
        if dtype not in _DTYPES:
            raise _bad(path, f"weight {name!r}: unsupported dtype {dtype!r} (supported: {', '.join(_DTYPES)})")
        if (not isinstance(shape, list) or len(shape) > 16
                or not all(type(d) is int and 0 <= d < 2**62 for d in shape)):
            raise _bad(path, f"weight {name!r}: bad shape {shape!r}")
        if (not isinstance(offsets, list) or len(offsets) != 2 or not all(type(o) is int for o in offsets)
                or not 0 <= offsets[0] <= offsets[1] <= data_len):
            raise _bad(path, f"weight {name!r}: data_offsets {offsets!r} lie outside the {data_len} data bytes "
                             "(truncated file?)")
        itemsize = 2 if dtype == "BF16" else np.dtype(_DTYPES[dtype]).itemsize
        count = 1
        for d in shape:
            count *= d
        if offsets[1] - offsets[0] != count * itemsize:
            raise _bad(path, f"weight {name!r}: shape {shape} {dtype} needs {count * itemsize} bytes, "
                             f"data_offsets give {offsets[1] - offsets[0]}")
        spans.append((offsets[0], offsets[1], name))
    spans.sort()
    for (_, end, a), (begin, _, b) in zip(spans, spans[1:]):
        if begin < end:
            raise _bad(path, f"weights {a!r} and {b!r} overlap")
    if data_len and spans:
        mm = np.memmap(path, dtype=np.uint8, mode="c")  # private: writes never reach the file
    for begin, end, name in spans:
        info = header[name]
        raw = mm[start + begin:start + end] if end > begin else np.empty(0, np.uint8)
        out[name] = raw.view(_np_dtype(info["dtype"])).reshape(info["shape"])
    return out, meta


def _config(path, meta):
    text = meta.get(CONFIG_KEY)
    if text is None:
        raise _bad(path, f"no '{CONFIG_KEY}' in the metadata: not saved by opforge's Layer.save")
    try:
        return json.loads(text)
    except ValueError as e:
        raise _bad(path, f"the layer config in the metadata is not valid JSON: {e}") from None


def load_weights(layer, path):
    arrays, _ = read_weights(path)
    expected = layer.weights()
    missing = [n for n in expected if n not in arrays]
    extra = [n for n in arrays if n not in expected]
    if missing:
        raise _bad(path, f"missing weight(s) {', '.join(map(repr, missing))} for {layer.name}")
    if extra:
        raise _bad(path, f"unexpected weight(s) {', '.join(map(repr, extra))} for {layer.name}")
    for name, array in arrays.items():
        layer.check_weight(name, array, source=os.fspath(path))
    layer.set_weights(arrays, copy=False)


def load_model(path):
    """Rebuilds the layer saved in `path` from its config and loads its weights (all or nothing)."""
    from opforge.nn.layers import build
    _, meta = read_weights(path)
    layer = build(_config(path, meta), path)
    load_weights(layer, path)
    return layer
