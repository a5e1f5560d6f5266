#include "graph.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "graph_fusion.h"
#include "graph_plan.h"
#include "opforge/inlined_vector.h"
#include "opforge/parallel.h"
#include "run_state.h"

namespace opforge {

namespace {

// True if the DAG never has two nodes ready at once (a chain).
bool IsSerial(const std::vector<int>& num_deps, const std::vector<std::vector<int>>& consumers) {
  std::vector<int> deps = num_deps;
  std::vector<int> ready;
  for (size_t i = 0; i < deps.size(); ++i) if (deps[i] == 0) ready.push_back(static_cast<int>(i));
  while (!ready.empty()) {
    if (ready.size() > 1) return false;
    const int i = ready.back();
    ready.pop_back();
    for (int c : consumers[i]) if (--deps[c] == 0) ready.push_back(c);
  }
  return true;
}

// Another tensor's storage that kernels may not write (optim's in-place
// updates check writable()): constants and feeds are only ever read.
class ReadOnlyBuffer : public TensorBuffer {
 public:
  explicit ReadOnlyBuffer(TensorBuffer* inner) : TensorBuffer(inner->data(), inner->size()), inner_(inner) {
    inner_->Ref();
  }
  bool writable() const override { return false; }

 private:
  ~ReadOnlyBuffer() override { inner_->Unref(); }
  TensorBuffer* inner_;
};

// A fetched value that shares a constant's or a feed's memory is copied:
// what the caller gets may be written without changing the graph.
Status Unshare(Tensor* t) {
  if (t->buffer() == nullptr || t->buffer()->writable()) return Status::OK();
  Tensor copy;
  OF_RETURN_IF_ERROR(Tensor::Allocate(t->dtype(), t->shape(), &copy));
  if (t->TotalBytes()) std::memcpy(copy.raw_data(), t->raw_data(), t->TotalBytes());
  *t = std::move(copy);
  return Status::OK();
}

}  // namespace

Tensor ReadOnly(const Tensor& t) {
  if (t.buffer() == nullptr || !t.buffer()->writable()) return t;
  auto* b = new ReadOnlyBuffer(t.buffer());
  return Tensor::Adopt(t.dtype(), t.shape(), b);
}

std::string GraphNode::Label() const {
  std::string label = "node '" + name + "' (" + (op ? op->name : kind == kPlaceholder ? "Placeholder" : "Const");
  if (!where.empty()) label += ", built at " + where;
  return label + ")";
}

std::string Graph::UniqueNameLocked(const std::string& base) {
  int& n = name_uses_[base];
  std::string name = n == 0 ? base : base + "_" + std::to_string(n);
  ++n;
  return name;
}

std::string Graph::UniqueName(const std::string& base) {
  std::lock_guard<std::mutex> lock(mu_);
  return UniqueNameLocked(base);
}

namespace {
const int64_t kUnknownRankDims[1] = {kUnknownDim};
}  // namespace

int Graph::AddPlaceholder(const std::string& base, DType dtype, const TensorShape& shape, std::string where,
                          bool unknown_rank) {
  GraphNode n;
  n.kind = GraphNode::kPlaceholder;
  n.where = std::move(where);
  n.dtypes = {dtype};
  n.shapes = {unknown_rank ? TensorShape(kUnknownRankDims, 1) : shape};
  if (unknown_rank) n.unknown_rank = {true};
  std::lock_guard<std::mutex> lock(mu_);
  n.name = UniqueNameLocked(base);
  nodes_.push_back(std::move(n));
  return static_cast<int>(nodes_.size()) - 1;
}

int Graph::AddConstant(const std::string& base, Tensor value, std::string where) {
  GraphNode n;
  n.kind = GraphNode::kConstant;
  n.where = std::move(where);
  n.dtypes = {value.dtype()};
  n.shapes = {value.shape()};
  n.value = ReadOnly(value);
  std::lock_guard<std::mutex> lock(mu_);
  n.name = UniqueNameLocked(base);
  nodes_.push_back(std::move(n));
  return static_cast<int>(nodes_.size()) - 1;
}

Status Graph::AddOp(const std::string& base, const OpDef* op, std::vector<NodeOutput> inputs,
                    std::vector<AttrValue> attrs, std::string where, int* id) {
  GraphNode n;
  n.kind = GraphNode::kOp;
  n.where = std::move(where);
  n.op = op;
  InlinedVector<InputSpec, 4> specs;  // dtype and shape: shape functions read no data
  std::unique_lock<std::mutex> lock(mu_);
  for (const NodeOutput& in : inputs) {
    if (in.node < 0 || in.node >= static_cast<int>(nodes_.size()) ||
        in.index >= static_cast<int>(nodes_[in.node].dtypes.size()) || in.index < 0) {
      n.name = base;
      return errors::InvalidArgument(n.Label(), ": input refers to a tensor that is not in this graph");
    }
    // Nodes never change once added and the deque keeps them in place, so
    // the specs stay valid while the lock is dropped for inference.
    const GraphNode& src = nodes_[in.node];
    if (src.RankUnknown(in.index)) {
      n.name = base;
      return errors::InvalidArgument(n.Label(), ": input ", src.name, ":", in.index, " has a shape of unknown rank");
    }
    specs.push_back(InputSpec{src.dtypes[in.index], &src.shapes[in.index],
                              src.kind == GraphNode::kConstant ? &src.value : nullptr});
  }
  n.name = UniqueNameLocked(base);
  lock.unlock();
  attrs.resize(op->attrs.size());
  n.dtypes.resize(op->outputs.size());
  n.shapes.resize(op->outputs.size());
  Status s = InferOutputs(*op, specs.data(), static_cast<int>(specs.size()), attrs.data(), n.shapes.data(),
                          n.dtypes.data());
  if (!s.ok()) return s.WithPrefix(n.Label() + ": ");
  n.attrs = std::move(attrs);
  n.inputs = std::move(inputs);
  lock.lock();
  n.control_inputs = control_deps_;
  nodes_.push_back(std::move(n));
  *id = static_cast<int>(nodes_.size()) - 1;
  return Status::OK();
}

int Graph::AddBound(std::string name, const BoundCall& call, std::vector<NodeOutput> inputs, std::string where) {
  GraphNode n;
  n.kind = GraphNode::kOp;
  n.name = std::move(name);
  n.where = std::move(where);
  n.op = call.op;
  n.attrs.assign(call.attrs.data(), call.attrs.data() + call.attrs.size());
  n.inputs = std::move(inputs);
  n.dtypes.assign(call.output_dtypes.data(), call.output_dtypes.data() + call.output_dtypes.size());
  for (size_t o = 0; o < call.output_shapes.size(); ++o) {
    const PartialShape& ps = call.output_shapes[o];
    n.shapes.push_back(ps.known_rank ? ps.dims : TensorShape(kUnknownRankDims, 1));
    if (!ps.known_rank) {
      n.unknown_rank.resize(call.output_shapes.size(), false);
      n.unknown_rank[o] = true;
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  n.control_inputs = control_deps_;
  nodes_.push_back(std::move(n));
  return static_cast<int>(nodes_.size()) - 1;
}

Status Graph::SetControlDeps(std::vector<int> deps) {
  std::lock_guard<std::mutex> lock(mu_);
  for (int d : deps) {
    if (d < 0 || d >= static_cast<int>(nodes_.size())) {
      return errors::InvalidArgument("control_dependencies: an operation is not in this graph");
    }
  }
  std::sort(deps.begin(), deps.end());
  deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
  control_deps_ = std::move(deps);
  return Status::OK();
}

std::vector<int> Graph::ControlDeps() const {
  std::lock_guard<std::mutex> lock(mu_);
  return control_deps_;
}

std::vector<std::vector<int>> Graph::Consumers() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::vector<int>> out(nodes_.size());
  for (size_t id = 0; id < nodes_.size(); ++id) {
    for (const NodeOutput& in : nodes_[id].inputs) out[in.node].push_back(static_cast<int>(id));
  }
  return out;
}

const GraphNode& Graph::node(int id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return nodes_[id];
}

int Graph::num_nodes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(nodes_.size());
}

Status Graph::GetPlan(const std::vector<std::pair<int, Tensor>>& feeds, const std::vector<NodeOutput>& fetches,
                      std::shared_ptr<const Plan>* out) {
  std::string key;
  for (const NodeOutput& f : fetches) key += std::to_string(f.node) + ":" + std::to_string(f.index) + ",";
  key += "|";
  for (const auto& f : feeds) key += std::to_string(f.first) + ",";
  std::lock_guard<std::mutex> lock(mu_);
  auto it = plans_.find(key);
  if (it != plans_.end()) {
    *out = it->second;
    return Status::OK();
  }
  const int n = static_cast<int>(nodes_.size());
  auto plan = std::make_shared<Plan>();
  std::vector<int> feed_of(n, -1);
  for (size_t i = 0; i < feeds.size(); ++i) {
    const int id = feeds[i].first;
    if (id < 0 || id >= n) return errors::InvalidArgument("Session.run: a feed is not a tensor of this graph");
    if (feed_of[id] >= 0) return errors::InvalidArgument("Session.run: ", nodes_[id].Label(), " is fed twice");
    if (nodes_[id].dtypes.size() != 1) {
      return errors::InvalidArgument("Session.run: ", nodes_[id].Label(), " has several outputs and cannot be fed");
    }
    feed_of[id] = static_cast<int>(i);
    plan->fed.push_back(&nodes_[id]);
  }
  // Node ids are topological (inputs exist before their consumers), so one
  // backward sweep marks everything the fetches need.
  std::vector<char> needed(n, 0);
  for (const NodeOutput& f : fetches) {
    if (f.node < 0 || f.node >= n || f.index < 0 || f.index >= static_cast<int>(nodes_[f.node].dtypes.size())) {
      return errors::InvalidArgument("Session.run: a fetch is not a tensor of this graph");
    }
    needed[f.node] = 1;
  }
  for (int id = n - 1; id >= 0; --id) {
    const GraphNode& node = nodes_[id];
    if (!needed[id] || feed_of[id] >= 0) continue;
    if (node.kind == GraphNode::kPlaceholder) {
      return errors::InvalidArgument("Session.run: ", node.Label(),
                                     " must be fed a value (feed_dict) to compute the fetches");
    }
    for (const NodeOutput& in : node.inputs) needed[in.node] = 1;
    for (int c : node.control_inputs) needed[c] = 1;
  }
  plan->fused = FuseElementwise(nodes_, feed_of, fetches, &needed);  // graph_fusion.h
  std::vector<int> plan_index(n, -1), const_slot(n, -1);
  auto source = [&](const NodeOutput& o) {
    if (feed_of[o.node] >= 0) return Plan::Source{Plan::Source::kFeed, feed_of[o.node], 0, nullptr};
    if (nodes_[o.node].kind == GraphNode::kConstant) {
      // The plan holds its own reference (packed, not spread over GraphNodes).
      int& slot = const_slot[o.node];
      if (slot < 0) {
        slot = static_cast<int>(plan->constants.size());
        plan->constants.push_back(nodes_[o.node].value);
      }
      return Plan::Source{Plan::Source::kConst, slot, 0, &nodes_[o.node]};
    }
    return Plan::Source{Plan::Source::kNode, plan_index[o.node], o.index, nullptr};
  };
  std::unordered_map<std::string, int> last_user;  // resource -> the last planned op naming it
  for (int id = 0; id < n; ++id) {
    const GraphNode& node = plan->fused ? plan->fused->Node(id, nodes_[id]) : nodes_[id];
    if (!needed[id] || feed_of[id] >= 0 || node.kind != GraphNode::kOp) continue;
    const int k = static_cast<int>(plan->nodes.size());
    plan_index[id] = k;
    plan->nodes.push_back(&node);
    plan->sources.emplace_back();
    plan->num_deps.push_back(0);
    plan->consumers.emplace_back();
    plan->uses.push_back(0);
    plan->fetched.push_back(0);
    plan->offset.push_back(plan->num_values);
    plan->num_values += static_cast<int>(node.dtypes.size());
    for (const NodeOutput& in : node.inputs) {
      const Plan::Source s = source(in);
      plan->sources[k].push_back(s);
      if (s.kind == Plan::Source::kNode) {
        ++plan->num_deps[k];
        plan->consumers[s.index].push_back(k);
        ++plan->uses[s.index];
      }
    }
    // Edges that carry no value: control inputs, and the previous planned
    // stateful op naming each of this op's resources (state is touched in
    // the order the graph was built).
    auto order_after = [&](int before) {
      if (before < 0) return;
      ++plan->num_deps[k];
      plan->consumers[before].push_back(k);
    };
    for (int c : node.control_inputs) {
      if (feed_of[c] < 0 && nodes_[c].kind == GraphNode::kOp) order_after(plan_index[c]);
    }
    for (int a : node.op->resource_attrs) {
      int& last = last_user[node.attrs[a].s];
      if (last >= 0) order_after(last);
      last = k;
    }
  }
  for (const NodeOutput& f : fetches) {
    const Plan::Source s = source(f);
    if (s.kind == Plan::Source::kNode) plan->fetched[s.index] = 1;
    plan->fetches.push_back(s);
  }
  plan->serial = IsSerial(plan->num_deps, plan->consumers);
  for (size_t k = 0; k < plan->nodes.size(); ++k) {
    const GraphNode& node = *plan->nodes[k];
    Plan::Step st;
    st.op = node.op;
    st.attrs = node.attrs.data();
    st.shapes = node.shapes.data();
    st.src_begin = static_cast<int>(plan->step_sources.size());
    plan->step_sources.insert(plan->step_sources.end(), plan->sources[k].begin(), plan->sources[k].end());
    st.src_end = static_cast<int>(plan->step_sources.size());
    st.offset = plan->offset[k];
    st.n_out = static_cast<int>(node.dtypes.size());
    st.fetched = plan->fetched[k];
    plan->steps.push_back(st);
    for (const TensorShape& shape : node.shapes) plan->dynamic = plan->dynamic || !IsFullyDefined(shape);
  }
  int64_t large = 0;
  for (const GraphNode* node : plan->nodes) {
    int64_t bytes = 0;
    for (size_t o = 0; o < node->shapes.size(); ++o) {
      if (IsFullyDefined(node->shapes[o])) bytes += node->shapes[o].num_elements() * DTypeSize(node->dtypes[o]);
    }
    large += bytes >= Plan::kLargeStepBytes;
  }
  plan->large_steps = !plan->nodes.empty() && 2 * large >= static_cast<int64_t>(plan->nodes.size());
  plans_.emplace(key, plan);
  *out = plan;
  return Status::OK();
}

Status Graph::Run(const std::vector<std::pair<int, Tensor>>& given, const std::vector<NodeOutput>& fetches,
                  int inter_op, std::vector<Tensor>* results, RunStats* stats, ResourceMgr* resources) {
  std::shared_ptr<const Plan> plan;
  OF_RETURN_IF_ERROR(GetPlan(given, fetches, &plan));
  Feeds feeds(given.size());
  for (size_t i = 0; i < given.size(); ++i) feeds[i] = {given[i].first, ReadOnly(given[i].second)};
  ScopedRunState run_state(resources, nullptr);
  OF_RETURN_IF_ERROR(RunPlan(*plan, feeds, inter_op, results, stats, resources));
  for (Tensor& t : *results) OF_RETURN_IF_ERROR(Unshare(&t));
  return Status::OK();
}

Status Graph::RunPlan(const Plan& p, const Feeds& feeds, int inter_op, std::vector<Tensor>* results,
                      RunStats* stats, ResourceMgr* resources) {
  // Feeds: the placeholder's dtype; another shape re-infers every planned op.
  bool reshaped = false;
  for (size_t i = 0; i < feeds.size(); ++i) {
    const GraphNode& node = *p.fed[i];
    if (feeds[i].second.dtype() != node.dtypes[0]) {
      return errors::InvalidArgument("Session.run: the value fed to ", node.Label(), " has dtype ",
                                     DTypeName(feeds[i].second.dtype()), " but the tensor has dtype ",
                                     DTypeName(node.dtypes[0]));
    }
    reshaped = reshaped || feeds[i].second.shape() != node.shapes[0];
  }
  reshaped = reshaped || p.dynamic;
  // A Session's default (kAutoInterOp): where the kernels split over the
  // intra-op threads themselves, two nodes at once only oversubscribe the
  // cores (resnet18: a 3x3 conv beside its 1x1 downsample, three threads on
  // two cores) and give up the memory plan (b8: fresh pages faulted in for
  // the first ~10 runs); else independent nodes on the inter-op pool.
  if (inter_op == kAutoInterOp) inter_op = p.large_steps && NumIntraOpThreads() > 1 ? 1 : NumInterOpThreads();
  // A chain, or one inter-op thread: in plan order on this thread, with the
  // static memory plan (memory_plan.cc).
  if (p.serial || inter_op <= 1) return RunInOrder(p, feeds, results, stats);
  // The shapes of these feeds' signature, inferred on its first run only.
  std::shared_ptr<const SignatureShapes> sig;
  if (reshaped) {
    OF_RETURN_IF_ERROR(ShapesFor(p, feeds, &sig));
    if (!sig->complete) return RunLazily(p, feeds, results, stats);  // shapes that depend on fed data
  }
  // One flat array holds every planned op's outputs (one allocation per run;
  // default-initialised: value-initialising Tensors is a memset).
  std::unique_ptr<Tensor[]> values(new Tensor[p.num_values]);
  auto input_of = [&](const Plan::Source& s) -> const Tensor& {
    switch (s.kind) {
      case Plan::Source::kFeed: return feeds[s.index].second;
      case Plan::Source::kConst: return p.constants[s.index];  // constants never change
      default: return values[p.offset[s.index] + s.output];
    }
  };
  std::unique_ptr<std::atomic<int>[]> uses(new std::atomic<int>[p.nodes.size()]);
  for (size_t k = 0; k < p.nodes.size(); ++k) uses[k].store(p.uses[k], std::memory_order_relaxed);
  std::atomic<int64_t> live{0}, peak{0};
  auto fn = [&](int k) -> Status {
    const Plan::Step& step = p.steps[k];
    Tensor* out = values.get() + step.offset;
    const Plan::Source* src_begin = p.step_sources.data() + step.src_begin;
    const Plan::Source* src_end = p.step_sources.data() + step.src_end;
    ScopedRunState run_state(resources, &p.nodes[k]->name);  // on a pool thread maybe
    {
      InlinedVector<Tensor, 4> in;
      for (const Plan::Source* s = src_begin; s != src_end; ++s) in.push_back(input_of(*s));
      const TensorShape* shapes = sig ? sig->values.data() + step.offset : step.shapes;
      Status s = RunKernel(*step.op, in.data(), static_cast<int>(in.size()), step.attrs, shapes, out);
      if (!s.ok()) return s.WithPrefix(p.nodes[k]->Label() + ": ");
    }
    int64_t bytes = 0, freed = 0;
    for (int o = 0; o < step.n_out; ++o) bytes += static_cast<int64_t>(out[o].TotalBytes());
    // Free each producer's outputs after their last reader.
    for (const Plan::Source* src = src_begin; src != src_end; ++src) {
      if (src->kind != Plan::Source::kNode) continue;
      const bool last = uses[src->index].fetch_sub(1, std::memory_order_acq_rel) == 1;
      const Plan::Step& producer = p.steps[src->index];
      if (last && !producer.fetched) {
        Tensor* dead = values.get() + producer.offset;
        for (int o = 0; o < producer.n_out; ++o) {
          freed += static_cast<int64_t>(dead[o].TotalBytes());
          dead[o] = Tensor();
        }
      }
    }
    const int64_t now = live.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    int64_t prev = peak.load(std::memory_order_relaxed);
    while (now > prev && !peak.compare_exchange_weak(prev, now, std::memory_order_relaxed)) {}
    if (freed) live.fetch_sub(freed, std::memory_order_relaxed);
    return Status::OK();
  };
  RunStats local;
  RunStats* st = stats ? stats : &local;
  *st = RunStats();
  OF_RETURN_IF_ERROR(RunDag(p.num_deps, p.consumers, inter_op, fn, st));
  st->peak_bytes = peak.load();
  results->clear();
  for (const Plan::Source& s : p.fetches) results->push_back(input_of(s));
  return Status::OK();
}

}  // namespace opforge
