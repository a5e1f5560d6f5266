"""opforge.train: checkpoints of variables (TensorFlow 1's ``tf.train``).

    saver = of.train.Saver()              # graph variables, per Session
    saver.save(sess, "model.safetensors")
    saver.restore(other_sess, "model.safetensors")

    ckpt = of.train.Checkpoint(model=model, step=step_var)   # eager
    ckpt.save("ckpt.safetensors"); ckpt.restore("ckpt.safetensors")

Files are safetensors (read as hostile input: see _safetensors.py).
"""

from opforge.train.checkpoint import Checkpoint
from opforge.train.saver import Saver

__all__ = ["Saver", "Checkpoint"]
