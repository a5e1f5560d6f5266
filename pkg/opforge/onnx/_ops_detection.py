"""ONNX NonMaxSuppression onto the detection op: the op writes a padded list
and its count; the converter keeps the first `count` rows, so it needs the
count's value (an eager run; a compiled graph runs such a model eagerly)."""

import numpy as np

from opforge import ops as P
from opforge.errors import UnimplementedError
from opforge.onnx._node import INT, converter, dtype_of


def _scalar(n, i, what, default):
    if not n.has(i):
        return default
    v = n.static(i, what).reshape(-1)
    if v.size != 1:
        raise n.fail(f"{what} must hold one value, got {v.size}")
    return v[0]


@converter("NonMaxSuppression", (10, 11), {"center_point_box": INT})
def _nms(n):
    boxes, scores = n.input(0), n.input(1)
    if n.attr("center_point_box", 0) not in (0, 1):
        raise n.fail(f"center_point_box must be 0 or 1, got {n.attr('center_point_box')}")
    keep = int(_scalar(n, 2, "max_output_boxes_per_class", 0))
    iou = float(_scalar(n, 3, "iou_threshold", 0.0))
    score = _scalar(n, 4, "score_threshold", None)
    if dtype_of(scores) != dtype_of(boxes):
        raise n.fail(f"boxes and scores must have one dtype, got {dtype_of(boxes)} and {dtype_of(scores)}")
    selected, count = P.non_max_suppression(
        boxes, scores, max_output_boxes_per_class=max(keep, 0), iou_threshold=iou,
        score_threshold=0.0 if score is None else float(score), use_score_threshold=score is not None,
        center_point_box=n.attr("center_point_box", 0))
    try:
        rows = int(np.asarray(count.numpy()))
    except Exception:  # noqa: BLE001 -- a graph tensor: the count is known only when the graph runs
        raise n.fail("the number of selected boxes depends on the values: it needs an eager run",
                     UnimplementedError) from None
    return P.slice(selected, begin=[0, 0], size=[rows, 3])
