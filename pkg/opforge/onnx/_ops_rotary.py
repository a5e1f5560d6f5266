"""ONNX RotaryEmbedding (opset 23) composed of opforge ops: the cos/sin rows
picked by position_ids, the head dims rotated in halves or interleaved pairs
(gathers with constant index arrays), the rest passed through."""

import numpy as np

from opforge import ops as P
from opforge.errors import UnimplementedError
from opforge.onnx import _take
from opforge.onnx._node import INT, converter, shape_of


def _check(n):
    if n.attr("interleaved", 0) not in (0, 1):
        raise n.fail(f"interleaved must be 0 or 1, got {n.attr('interleaved')}")


@converter("RotaryEmbedding", (23,), {"interleaved": INT, "rotary_embedding_dim": INT, "num_heads": INT},
           check=_check)
def _rotary(n):
    x = n.input(0)
    shape = shape_of(x)
    if None in shape or len(shape) not in (3, 4):
        raise n.fail(f"X must be 3-D or 4-D with static dims, got {list(shape)}", UnimplementedError)
    if len(shape) == 4:  # [batch, heads, seq, head] -> [batch, seq, heads, head]
        x = P.transpose(x, perm=[0, 2, 1, 3])
        b, s, h, d = shape[0], shape[2], shape[1], shape[3]
    else:
        heads = n.attr("num_heads", 0)
        if not heads or shape[2] % heads:
            raise n.fail(f"a 3-D X needs num_heads dividing its hidden size {shape[2]}, got {heads}")
        b, s, h, d = shape[0], shape[1], heads, shape[2] // heads
        x = P.reshape(x, shape=[b, s, h, d])
    rot = n.attr("rotary_embedding_dim", 0) or d
    if rot % 2 or rot > d:
        raise n.fail(f"rotary_embedding_dim {rot} must be even and at most the head size {d}")
    half = rot // 2
    cos, sin = n.input(1), n.input(2)
    if n.has(3):
        pos = n.input(3)
        cos, sin = _take.take(cos, pos, 0), _take.take(sin, pos, 0)
    if shape_of(cos)[-1] != half or shape_of(sin)[-1] != half:
        raise n.fail(f"the cos/sin caches' last dim must be rotary_embedding_dim/2 = {half}, got "
                     f"{shape_of(cos)[-1]} and {shape_of(sin)[-1]}")
    cos, sin = (P.reshape(c, shape=[b, s, 1, half]) for c in (cos, sin))
    x_rot = x if rot == d else P.slice(x, begin=[0, 0, 0, 0], size=[b, s, h, rot])
    if n.attr("interleaved", 0):
        x1 = _take.take(x_rot, np.arange(0, rot, 2, dtype=np.int64), 3)
        x2 = _take.take(x_rot, np.arange(1, rot, 2, dtype=np.int64), 3)
    else:
        x1 = P.slice(x_rot, begin=[0, 0, 0, 0], size=[b, s, h, half])
        x2 = P.slice(x_rot, begin=[0, 0, 0, half], size=[b, s, h, half])
    real = P.sub(P.mul(cos, x1), P.mul(sin, x2))
    imag = P.add(P.mul(sin, x1), P.mul(cos, x2))
    if n.attr("interleaved", 0):
        pairs = P.concat([P.reshape(real, shape=[b, s, h, half, 1]), P.reshape(imag, shape=[b, s, h, half, 1])],
                         axis=4)
        y = P.reshape(pairs, shape=[b, s, h, rot])
    else:
        y = P.concat([real, imag], axis=3)
    if rot < d:
        y = P.concat([y, P.slice(x, begin=[0, 0, 0, rot], size=[b, s, h, d - rot])], axis=3)
    if len(shape) == 4:
        return P.transpose(y, perm=[0, 2, 1, 3])
    return P.reshape(y, shape=list(shape))
