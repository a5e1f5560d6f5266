// Shapes of a planned graph per run (framework-internal): re-inference from
// the fed shapes, with the shape tensors that follow from them computed on
// the way, and the lazy runner for shapes that depend on fed data.
#include <algorithm>

#include "graph_plan.h"
#include "opforge/inlined_vector.h"
#include "run_state.h"

namespace opforge {

namespace {

// Shape tensors are small: values past this many elements are left to the run.
constexpr int64_t kMaxKnownElements = 4096;

// The value of a Shape op's output: its input's dims (no data read).
Tensor ShapeValue(const TensorShape& in) {
  Tensor t;
  if (!Tensor::Allocate(DType::kInt64, TensorShape({in.rank()}), &t).ok()) return Tensor();
  for (int i = 0; i < in.rank(); ++i) t.data<int64_t>()[i] = in.dim(i);
  return t;
}

}  // namespace

Status ReinferShapes(const Graph::Plan& p, const Feeds& feeds, std::vector<TensorShape>* shapes,
                     std::vector<Tensor>* known_out, bool* complete) {
  using Source = Graph::Plan::Source;
  std::vector<TensorShape>& reinferred = *shapes;
  reinferred.assign(p.num_values, TensorShape());
  std::vector<Tensor> local;
  std::vector<Tensor>& known = known_out ? *known_out : local;
  known.assign(p.num_values, Tensor());
  bool all_known_shapes = true;
  // Per node: InputSpecs over what is known (no tensor copies), the shape
  // function alone (attrs were completed and dtypes checked when the graph
  // was planned), and the kernel only for small ops of known inputs.
  InlinedVector<InputSpec, 8> specs;
  InlinedVector<Tensor, 4> values, empties;
  for (size_t k = 0; k < p.nodes.size(); ++k) {
    const GraphNode& node = *p.nodes[k];
    specs.clear();
    empties.clear();
    empties.resize(p.sources[k].size());  // sized once per node: specs point into it
    bool values_known = true;
    for (const Source& s : p.sources[k]) {
      switch (s.kind) {
        case Source::kNode: {
          const int v = p.offset[s.index] + s.output;
          const DType dtype = p.nodes[s.index]->dtypes[s.output];
          if (known[v].valid()) {
            specs.push_back(InputSpec{dtype, &known[v].shape(), &known[v]});
          } else if (reinferred[v].num_elements() == 0) {  // empty: its value is known
            Tensor& e = empties[specs.size()];
            e = Tensor(dtype, reinferred[v], nullptr);
            specs.push_back(InputSpec{dtype, &e.shape(), &e});
          } else {
            specs.push_back(InputSpec{dtype, &reinferred[v], nullptr});
            values_known = false;
          }
          break;
        }
        case Source::kFeed: {  // its shape only: a value read from fed data varies with the same shapes
          const Tensor& f = feeds[s.index].second;
          const bool empty = f.NumElements() == 0;
          specs.push_back(InputSpec{f.dtype(), &f.shape(), empty ? &f : nullptr});
          values_known = values_known && empty;
          break;
        }
        case Source::kConst: {
          const Tensor& c = p.constants[s.index];
          specs.push_back(InputSpec{c.dtype(), &c.shape(), &c});
          break;
        }
      }
    }
    const int n_in = static_cast<int>(specs.size());
    TensorShape* out = reinferred.data() + p.offset[k];
    Status s = InferPlannedShapes(*node.op, specs.data(), n_in, node.attrs.data(), out);
    if (!s.ok()) return s.WithPrefix("Session.run: with the fed shapes, " + node.Label() + ": ");
    if (node.op->name == "ReshapeTo") {
      // Its static dims may be a guess from a partly known target (shape_ops.cc): check it.
      const TensorShape& planned = node.shapes[0];
      for (int d = 0; d < planned.rank() && d < out[0].rank(); ++d) {
        if (!IsUnknownDim(planned.dim(d)) && !IsUnknownDim(out[0].dim(d)) && planned.dim(d) != out[0].dim(d)) {
          return errors::InvalidArgument("Session.run: with the fed shapes, ", node.Label(), ": ReshapeTo: the "
                                         "result has shape ", out[0].DebugString(), " but the graph was built for ",
                                         planned.DebugString());
        }
      }
    }
    bool small = !node.op->stateful;
    for (size_t o = 0; o < node.dtypes.size(); ++o) {
      const bool full = IsFullyDefined(out[o]);
      all_known_shapes = all_known_shapes && full;
      small = small && full && out[o].num_elements() <= kMaxKnownElements;
    }
    if (!small) continue;
    if (node.op->name == "Shape" && n_in == 1) {
      known[p.offset[k]] = ReadOnly(ShapeValue(*specs[0].shape));
    } else if (values_known) {
      // Every input is known: run the (small) op now, as constant folding
      // would; its readers' shape functions see the value.
      values.clear();
      for (const InputSpec& in : specs) values.push_back(*in.value);
      std::vector<Tensor> outs(node.dtypes.size());
      Status r = RunKernel(*node.op, values.data(), n_in, node.attrs.data(), out, outs.data());
      if (!r.ok()) return r.WithPrefix("Session.run: with the fed shapes, " + node.Label() + ": ");
      for (size_t o = 0; o < outs.size(); ++o) known[p.offset[k] + o] = ReadOnly(outs[o]);
    }
  }
  if (complete) *complete = all_known_shapes;
  return Status::OK();
}

Status ShapesFor(const Graph::Plan& p, const Feeds& feeds, std::shared_ptr<const SignatureShapes>* out) {
  auto fits = [&](const SignatureShapes& sig) {
    for (size_t i = 0; i < feeds.size(); ++i) {
      if (feeds[i].second.shape() != sig.feeds[i]) return false;
    }
    return true;
  };
  {
    std::lock_guard<std::mutex> lock(p.shapes_mu);
    auto& cache = p.signature_shapes;
    for (size_t i = 0; i < cache.size(); ++i) {
      if (!fits(*cache[i])) continue;
      *out = cache[i];
      if (i > 0) std::rotate(cache.begin(), cache.begin() + static_cast<std::ptrdiff_t>(i),
                             cache.begin() + static_cast<std::ptrdiff_t>(i) + 1);
      return Status::OK();
    }
  }
  auto sig = std::make_shared<SignatureShapes>();  // inferred outside the lock: a concurrent miss infers too
  for (const auto& f : feeds) sig->feeds.push_back(f.second.shape());
  OF_RETURN_IF_ERROR(ReinferShapes(p, feeds, &sig->values, &sig->known, &sig->complete));
  std::lock_guard<std::mutex> lock(p.shapes_mu);
  auto& cache = p.signature_shapes;
  cache.insert(cache.begin(), sig);
  if (static_cast<int>(cache.size()) > Graph::Plan::kArenas) cache.pop_back();
  *out = std::move(sig);
  return Status::OK();
}

Status RunLazily(const Graph::Plan& p, const Feeds& feeds, std::vector<Tensor>* results, RunStats* stats) {
  using Source = Graph::Plan::Source;
  std::vector<Tensor> values(p.num_values);
  auto input_of = [&](const Source& s) -> const Tensor& {
    switch (s.kind) {
      case Source::kFeed: return feeds[s.index].second;
      case Source::kConst: return p.constants[s.index];
      default: return values[p.offset[s.index] + s.output];
    }
  };
  std::vector<int> uses(p.uses);
  for (size_t k = 0; k < p.nodes.size(); ++k) {
    const GraphNode& node = *p.nodes[k];
    InlinedVector<Tensor, 4> in;
    for (const Source& s : p.sources[k]) in.push_back(input_of(s));
    std::vector<AttrValue> attrs = node.attrs;
    std::vector<DType> dtypes(node.dtypes.size());
    std::vector<TensorShape> shapes(node.dtypes.size());
    if (node.op->stateful) CurrentRunState().node = &node.name;
    Status s = InferFromTensors(*node.op, in.data(), static_cast<int>(in.size()), attrs.data(), dtypes.data(),
                                shapes.data());
    if (s.ok()) s = RunKernel(*node.op, in.data(), static_cast<int>(in.size()), attrs.data(), shapes.data(),
                              values.data() + p.offset[k]);
    if (!s.ok()) return s.WithPrefix(node.Label() + ": ");
    for (const Source& src : p.sources[k]) {  // free each producer's outputs after their last reader
      if (src.kind != Source::kNode || --uses[src.index] != 0 || p.fetched[src.index]) continue;
      for (size_t o = 0; o < p.nodes[src.index]->dtypes.size(); ++o) values[p.offset[src.index] + o] = Tensor();
    }
  }
  results->clear();
  for (const Source& s : p.fetches) results->push_back(input_of(s));
  if (stats) {
    *stats = RunStats();
    stats->nodes_run = static_cast<int64_t>(p.nodes.size());
    stats->max_concurrent = p.nodes.empty() ? 0 : 1;
  }
  return Status::OK();
}

}  // namespace opforge
