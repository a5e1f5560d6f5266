// Kernel of the detection group (cpp/ops/detection_ops.cc): greedy
// NonMaxSuppression, one batch/class at a time, IoU computed in double.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "opforge/kernel.h"

namespace opforge {
namespace {

struct Box {
  double y1, x1, y2, x2, area;
};

template <typename T>
Box ReadBox(const T* b, bool center) {
  Box r{};
  if (center) {  // [x_center, y_center, width, height]
    const double xc = b[0], yc = b[1], w = b[2], h = b[3];
    r = {yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2, 0};
  } else {  // [y1, x1, y2, x2], either diagonal
    r = {std::min<double>(b[0], b[2]), std::min<double>(b[1], b[3]), std::max<double>(b[0], b[2]),
         std::max<double>(b[1], b[3]), 0};
  }
  r.area = (r.y2 - r.y1) * (r.x2 - r.x1);
  return r;
}

double IoU(const Box& a, const Box& b) {
  const double h = std::min(a.y2, b.y2) - std::max(a.y1, b.y1);
  const double w = std::min(a.x2, b.x2) - std::max(a.x1, b.x1);
  if (h <= 0 || w <= 0) return 0.0;
  const double inter = h * w, uni = a.area + b.area - inter;
  return uni > 0 ? inter / uni : 0.0;
}

template <typename T>
Status NonMaxSuppressionKernel(OpKernelContext* ctx) {
  const Tensor& boxes = ctx->input(0);
  const Tensor& scores = ctx->input(1);
  Tensor* selected = nullptr;
  Tensor* count = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &selected));
  OF_RETURN_IF_ERROR(ctx->allocate_output(1, &count));
  const int64_t batch = scores.shape().dim(0), classes = scores.shape().dim(1), n = scores.shape().dim(2);
  const int64_t keep = std::min<int64_t>(ctx->attr_int("max_output_boxes_per_class"), n);
  const double iou_max = ctx->attr_float("iou_threshold");
  const bool use_min = ctx->attr_bool("use_score_threshold");
  const double score_min = ctx->attr_float("score_threshold");
  const bool center = ctx->attr_int("center_point_box") != 0;
  if (iou_max < 0 || iou_max > 1) {
    return errors::InvalidArgument("NonMaxSuppression: attr 'iou_threshold' must be in [0, 1], got ", iou_max);
  }
  const T* bp = boxes.data<T>();
  const T* sp = scores.data<T>();
  int64_t* out = selected->data<int64_t>();
  std::fill(out, out + selected->NumElements(), int64_t{-1});
  int64_t rows = 0;
  std::vector<Box> all(static_cast<size_t>(n));
  std::vector<int64_t> order;
  std::vector<int64_t> kept;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t i = 0; i < n; ++i) all[static_cast<size_t>(i)] = ReadBox(bp + (b * n + i) * 4, center);
    for (int64_t c = 0; c < classes && keep > 0; ++c) {
      const T* s = sp + (b * classes + c) * n;
      order.clear();
      for (int64_t i = 0; i < n; ++i) {
        if (!use_min || static_cast<double>(s[i]) > score_min) order.push_back(i);
      }
      // NaN ranks last, so the order stays a strict weak ordering.
      auto key = [s](int64_t i) { return std::isnan(static_cast<double>(s[i])) ? -HUGE_VAL : static_cast<double>(s[i]); };
      std::stable_sort(order.begin(), order.end(), [&key](int64_t x, int64_t y) { return key(x) > key(y); });
      kept.clear();
      for (int64_t i : order) {
        if (static_cast<int64_t>(kept.size()) == keep) break;
        bool drop = false;
        for (int64_t k : kept) {
          if (IoU(all[static_cast<size_t>(i)], all[static_cast<size_t>(k)]) > iou_max) {
            drop = true;
            break;
          }
        }
        if (drop) continue;
        kept.push_back(i);
        out[rows * 3] = b;
        out[rows * 3 + 1] = c;
        out[rows * 3 + 2] = i;
        ++rows;
      }
    }
  }
  *count->data<int64_t>() = rows;
  return Status::OK();
}

}  // namespace

REGISTER_KERNEL("NonMaxSuppression", kCPU, DType::kFloat32, NonMaxSuppressionKernel<float>);
REGISTER_KERNEL("NonMaxSuppression", kCPU, DType::kFloat64, NonMaxSuppressionKernel<double>);

}  // namespace opforge
