"""Mixed precision (opforge.amp): ``of.autocast(of.bfloat16)`` (or ``of.float16``).

Inside the context every layer call (``layer(x)``) runs its forward in the
given dtype: floating inputs and the layer's floating weights are cast to it
on the way in, with ``of.cast`` -- a recorded, differentiable op -- so the
weights themselves stay float32 ("master weights"): the gradient of the
cast is a cast back, ``loss.backward()`` leaves float32 gradients on the
float32 parameters, and optimizers update them in float32. Outputs stay in
the autocast dtype; cast them (or the loss) to float32 where you need it.

Thread-local: each thread has its own setting.
"""
import contextlib
import threading

from opforge import dtypes as _dtypes

_state = threading.local()


def autocast_dtype():
    """The dtype layers compute in on this thread, or None outside ``autocast``."""
    return getattr(_state, "dtype", None)


@contextlib.contextmanager
def autocast(dtype=_dtypes.bfloat16, enabled=True):
    """Runs layer calls in `dtype` (float16 or bfloat16), keeping float32 weights."""
    d = _dtypes.as_dtype(dtype)
    if enabled and d not in (_dtypes.float16, _dtypes.bfloat16):
        raise ValueError(f"autocast: dtype must be float16 or bfloat16, not {d.name}")
    previous = autocast_dtype()
    _state.dtype = d if enabled else None
    try:
        yield d
    finally:
        _state.dtype = previous


def _cast_in(value, dtype):
    import opforge
    from opforge.tensor import Tensor
    if isinstance(value, Tensor) and value.dtype.is_floating and value.dtype is not dtype:
        return opforge.cast(value, dtype)
    if hasattr(value, "dtype") and getattr(value, "ndim", None) is not None and not isinstance(value, Tensor):
        try:
            if _dtypes.as_dtype(value.dtype).is_floating and _dtypes.as_dtype(value.dtype) is not dtype:
                return opforge.cast(value, dtype)
        except TypeError:
            pass
    return value


@contextlib.contextmanager
def cast_weights(layer, dtype):
    """While the block runs, `layer`'s own floating weights read as `dtype` casts of themselves."""
    own = layer.__dict__["_weights"]
    saved = dict(own)
    try:
        for name, w in saved.items():
            own[name] = _cast_in(w, dtype)
        yield
    finally:
        own.clear()
        own.update(saved)


def call(layer, xs, kwargs):
    """Layer.__call__ under autocast: inputs and the layer's weights in the autocast dtype."""
    dtype = autocast_dtype()
    xs = tuple(_cast_in(x, dtype) for x in xs)
    kwargs = {k: _cast_in(v, dtype) for k, v in kwargs.items()}
    with cast_weights(layer, dtype):
        return layer.forward(*xs, **kwargs)
