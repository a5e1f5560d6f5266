"""test_bad_input oracle for NonMaxSuppression (robustness_oracles.py merges it into ORACLES):
the greedy algorithm in float64 Python, with C++'s std::min/std::max NaN behaviour."""
import math

import numpy as np
from hypothesis import strategies as st

from opforge.testing.check.inputs import array, quiet


def _nms_gen(draw, dtype):
    b, s, c = draw(st.integers(0, 2)), draw(st.integers(0, 5)), draw(st.integers(0, 3))
    bad = draw(st.integers(0, 9)) == 0
    boxes = array(draw, dtype, (b, s, 4 if not bad else draw(st.integers(0, 5))))
    scores = array(draw, dtype, (b, c, s if not bad or draw(st.booleans()) else s + 1))
    attrs = {"max_output_boxes_per_class": draw(st.integers(0, 6)),
             "iou_threshold": draw(st.sampled_from([0.0, 0.3, 0.5, 1.0, 1.5])),
             "score_threshold": draw(st.sampled_from([0.0, -1.0, 0.25])),
             "use_score_threshold": draw(st.booleans()), "center_point_box": draw(st.integers(0, 1))}
    return (boxes, scores), attrs


def _min(a, b):  # std::min
    return b if b < a else a


def _max(a, b):  # std::max
    return b if a < b else a


def _box(v, center):
    v = [float(t) for t in v]
    if center:
        xc, yc, w, h = v
        y1, x1, y2, x2 = yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2
    else:
        y1, x1, y2, x2 = _min(v[0], v[2]), _min(v[1], v[3]), _max(v[0], v[2]), _max(v[1], v[3])
    return y1, x1, y2, x2, (y2 - y1) * (x2 - x1)


def _iou(a, b):
    h = _min(a[2], b[2]) - _max(a[0], b[0])
    w = _min(a[3], b[3]) - _max(a[1], b[1])
    if h <= 0 or w <= 0:
        return 0.0
    inter = h * w
    uni = a[4] + b[4] - inter
    return inter / uni if uni > 0 else 0.0


@quiet
def non_max_suppression(boxes, scores, max_output_boxes_per_class, iou_threshold, score_threshold,
                        use_score_threshold, center_point_box):
    if boxes.ndim != 3 or boxes.shape[2] != 4 or scores.ndim != 3 or scores.shape[0] != boxes.shape[0] \
            or scores.shape[2] != boxes.shape[1]:
        raise ValueError("shapes")
    batch, classes, n = scores.shape
    keep = min(max_output_boxes_per_class, n)
    if not 0 <= iou_threshold <= 1:
        raise ValueError("iou_threshold")
    out = np.full((batch * classes * keep, 3), -1, np.int64)
    rows = 0
    for b in range(batch):
        all_boxes = [_box(boxes[b, i], center_point_box) for i in range(n)]
        for c in range(classes if keep > 0 else 0):
            s = [float(v) for v in scores[b, c]]
            order = [i for i in range(n) if not use_score_threshold or s[i] > score_threshold]
            order.sort(key=lambda i: -(-math.inf if math.isnan(s[i]) else s[i]))  # stable
            kept = []
            for i in order:
                if len(kept) == keep:
                    break
                if any(_iou(all_boxes[i], all_boxes[k]) > iou_threshold for k in kept):
                    continue
                kept.append(i)
                out[rows] = (b, c, i)
                rows += 1
    return out, np.array(rows, np.int64)


DETECTION_ORACLES = {"NonMaxSuppression": (_nms_gen, non_max_suppression)}
