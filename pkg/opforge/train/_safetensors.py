"""A small safetensors reader and writer (the format of checkpoints).

The file is read as hostile input: every length, offset, dtype and shape in
the header is checked against the file before any array is made, and a
problem is an InvalidArgumentError naming the file and the entry. No
dependency on the ``safetensors`` package.
"""

import json
import os

import numpy as np

from opforge import errors as _errors

_DTYPES = {"F32": np.float32, "F64": np.float64, "I32": np.int32, "I64": np.int64, "BOOL": np.bool_,
           "F16": np.float16, "I8": np.int8, "U8": np.uint8, "I16": np.int16, "U16": np.uint16,
           "U32": np.uint32, "U64": np.uint64,
           "BF16": np.uint16}  # stored as its bits; ml_dtypes' bfloat16 once read (_bfloat16)
_CODES = {np.dtype(v).name: k for k, v in _DTYPES.items() if k != "BF16"}
_CODES["bfloat16"] = "BF16"


def _bfloat16(bits, name):
    """uint16 bits as ml_dtypes' bfloat16 (imported only when a file holds one)."""
    try:
        import ml_dtypes
    except ImportError as e:
        raise _errors.InvalidArgumentError(
            f"load: '{name}' is bfloat16, which numpy reads through ml_dtypes: pip install ml_dtypes") from e
    return bits.view(ml_dtypes.bfloat16)
_MAX_HEADER = 100 << 20


def save_file(tensors, path, metadata=None):
    """Writes {name: ndarray} (C-contiguous copies) with str->str metadata."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        arr = np.asarray(tensors[name])
        if not arr.flags.c_contiguous:  # (ascontiguousarray would make a scalar 1-d)
            arr = arr.copy(order="C")
        code = _CODES.get(arr.dtype.name)
        if code is None:
            raise _errors.InvalidArgumentError(f"save: '{name}' has dtype {arr.dtype}, which checkpoints do not store")
        if code == "BF16":
            arr = arr.view(np.uint16)
        data = arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": code, "shape": list(arr.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # data 8-byte aligned, as the format recommends
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)  # a crash mid-write leaves the old checkpoint


def _no_duplicates(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"the name {k!r} appears twice")
        out[k] = v
    return out


def load_file(path):
    """({name: ndarray}, metadata) from a safetensors file, validated."""
    def bad(why):
        return _errors.InvalidArgumentError(f"checkpoint '{path}' is not a valid safetensors file: {why}")
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError as e:
        raise _errors.NotFoundError(f"checkpoint '{path}' cannot be read: {e.strerror or e}") from None
    if len(blob) < 8:
        raise bad(f"{len(blob)} bytes, shorter than the 8-byte header length")
    n = int.from_bytes(blob[:8], "little")
    if n > len(blob) - 8 or n > _MAX_HEADER:
        raise bad(f"the header length {n} exceeds the file ({len(blob)} bytes) or {_MAX_HEADER} bytes")
    try:
        header = json.loads(blob[8:8 + n].decode("utf-8"), object_pairs_hook=_no_duplicates)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise bad(f"the header is not JSON: {e}") from None
    if not isinstance(header, dict):
        raise bad("the header is not a JSON object")
    data = memoryview(blob)[8 + n:]
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                 for k, v in metadata.items()):
        raise bad("__metadata__ must map strings to strings")
    spans, out = [], {}
    for name, entry in header.items():
        if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}:
            raise bad(f"entry '{name}' must have exactly dtype, shape and data_offsets")
        dtype = _DTYPES.get(entry["dtype"]) if isinstance(entry["dtype"], str) else None
        if dtype is None:
            raise bad(f"entry '{name}' has unsupported dtype {entry['dtype']!r}")
        shape, offs = entry["shape"], entry["data_offsets"]
        if (not isinstance(shape, list) or len(shape) > 16
                or not all(type(d) is int and 0 <= d < (1 << 62) for d in shape)):
            raise bad(f"entry '{name}' has a bad shape {shape!r}")
        if not isinstance(offs, list) or len(offs) != 2 or not all(type(o) is int for o in offs):
            raise bad(f"entry '{name}' has bad data_offsets {offs!r}")
        begin, end = offs
        count = 1
        for d in shape:
            count *= d
        if not 0 <= begin <= end <= len(data) or end - begin != count * np.dtype(dtype).itemsize:
            raise bad(f"entry '{name}': data_offsets {offs} do not hold {shape} {entry['dtype']} "
                      f"within the {len(data)} data bytes")
        spans.append((begin, end, name))
        out[name] = np.frombuffer(data[begin:end], dtype=np.dtype(dtype).newbyteorder("<")).reshape(shape).astype(
            dtype, copy=True)
        if entry["dtype"] == "BF16":
            out[name] = _bfloat16(out[name], name)
    spans.sort()
    for (b0, e0, n0), (b1, _, n1) in zip(spans, spans[1:]):
        if b1 < e0:
            raise bad(f"entries '{n0}' and '{n1}' overlap")
    return out, metadata
