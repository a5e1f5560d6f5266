// The detection group: NonMaxSuppression (ONNX's), whose output size depends
// on the values: it writes a padded list and the count, and the caller keeps
// the first `count` rows. Kernel in cpp/kernels/detection_kernels.cc.
#include <algorithm>

#include "opforge/op.h"
#include "opforge/shape_inference.h"

namespace opforge {
namespace {

Status NonMaxSuppressionShape(InferenceContext* ctx) {
  const TensorShape& boxes = ctx->input_shape(0);
  const TensorShape& scores = ctx->input_shape(1);
  if (boxes.rank() != 3 || boxes.dim(2) != 4) {
    return errors::InvalidArgument("NonMaxSuppression: argument 'boxes' must have shape [batch, boxes, 4], got ",
                                   boxes.DebugString());
  }
  if (scores.rank() != 3 || scores.dim(0) != boxes.dim(0) || scores.dim(2) != boxes.dim(1)) {
    return errors::InvalidArgument("NonMaxSuppression: argument 'scores' must have shape [batch, classes, boxes] ",
                                   "matching 'boxes' ", boxes.DebugString(), ", got ", scores.DebugString());
  }
  const int64_t keep = std::min<int64_t>(ctx->attr_int("max_output_boxes_per_class"), boxes.dim(1));
  ctx->set_output_shape(0, TensorShape({scores.dim(0) * scores.dim(1) * keep, 3}));
  ctx->set_output_shape(1, TensorShape({}));
  return Status::OK();
}

}  // namespace

REGISTER_OP("NonMaxSuppression")
    .Input("boxes: T")
    .Input("scores: T")
    .Output("selected: int64")
    .Output("count: int64")
    .Attr("T: floattype")
    .Attr("max_output_boxes_per_class: int >= 0")
    .Attr("iou_threshold: float = 0.0")
    .Attr("score_threshold: float = 0.0")
    .Attr("use_score_threshold: bool = false")
    .Attr("center_point_box: int = 0")
    .SetShapeFn(NonMaxSuppressionShape)
    .NoGradient()  // integer indices
    .Doc(R"doc(
Greedy non-maximum suppression per batch and class (ONNX NonMaxSuppression).

For each batch b and class c, the boxes whose score exceeds score_threshold
(when use_score_threshold) are taken in order of decreasing score (ties: the
lower box index first); a box is kept unless its IoU with a kept box exceeds
iou_threshold, up to max_output_boxes_per_class boxes. Rows [b, c, box] of
the kept boxes fill `selected` in that order (b, then c, then selection);
the rows past `count` are -1.

boxes: [batch, boxes, 4]: corners [y1, x1, y2, x2] (either diagonal), or
  [x_center, y_center, width, height] with center_point_box = 1.
scores: [batch, classes, boxes].
max_output_boxes_per_class: The most boxes kept per batch and class.
iou_threshold: A box overlapping a kept one by more than this is dropped.
score_threshold: The score a box must exceed, when use_score_threshold.
use_score_threshold: Whether score_threshold applies.
center_point_box: 0 for corner boxes, 1 for center-size boxes.
selected: [batch * classes * min(max_output_boxes_per_class, boxes), 3].
count: The number of rows of `selected` in use.
)doc");

}  // namespace opforge
