// The in-order graph runner and its static memory plan.
//
// Run in plan order, a value's lifetime is known before anything runs: from
// the step that makes it to its last reader. Each plan keeps an Arena built
// from those lifetimes (per fed shapes): intermediates share a few reusable
// buffers ("slots"), and every step's input and output tensors are bound to
// them once, so a run only calls kernels: no allocation, no reference
// counting, no tensor copies per node. What the arena never holds:
//   - fetched values (handed to the caller: a fresh allocation per run),
//   - large values (the allocator's block cache already recycles those),
//   - outputs of steps whose kernel aliased an input (Identity, Reshape);
//     what they alias stays in its slot as long as the alias is read.
// A kernel that hands out another buffer than the planned one is found
// right after it runs: the rest of the run writes no slot (plain
// allocation), the arena is dropped after the run, and the step is
// remembered so the next plan leaves its outputs to the kernel.
#include <algorithm>
#include <chrono>
#include <memory>

#include "graph_plan.h"
#include "run_profile.h"
#include "run_state.h"

namespace opforge {

namespace {

// Values smaller than this live in the arena (the allocator's heap tiers:
// their allocations are what per-node costs are made of; from here up it
// maps memory and recycles it through its own cache).
constexpr int64_t kArenaLimitBytes = int64_t{1} << 20;

}  // namespace

struct Arena {
  struct Dyn {  // an input bound per run: a feed or a value outside the arena
    int slot;   // into ins
    bool feed;
    int index;  // feed index, or value index into outs
  };
  struct Step {
    KernelFn fn;  // null: no kernel for the dtype (RunKernel reports it)
    const OpDef* op;
    const AttrValue* attrs;
    const TensorShape* shapes;
    int in_begin, n_in, out_begin, n_out;
    int dyn_begin, dyn_end;  // into dyn
    int rel_begin, rel_end;  // into release: values outside the arena read last here
    bool aliasing;           // planned as an alias of its inputs (outputs outside the arena)
    bool precomputed;        // a shape tensor computed when the plan was made: not run
  };
  std::vector<TensorShape> feed_shapes;  // what the plan was made for
  std::vector<TensorShape> shapes;       // per value
  std::vector<Tensor> outs;              // per value; arena values bound to their slot
  std::vector<TensorBuffer*> expect;     // per value: its slot's buffer, null outside the arena
  std::vector<char> kept;                // per value: precomputed, kept from run to run
  std::vector<Tensor> ins;               // per step input; bound unless dynamic
  std::vector<Dyn> dyn;
  std::vector<int> release;
  std::vector<Step> steps;
  std::vector<Tensor> slots;             // owns the slot buffers
  int64_t arena_bytes = 0;

  bool Fits(const Feeds& feeds) const {
    for (size_t i = 0; i < feeds.size(); ++i) {
      if (feeds[i].second.shape() != feed_shapes[i]) return false;
    }
    return true;
  }
};

Graph::Plan::~Plan() {
  for (Arena* a : arenas) delete a;
}

Arena* Graph::Plan::TakeArena(const Feeds& feeds) const {
  std::lock_guard<std::mutex> lock(arena_mu);
  for (size_t i = 0; i < arenas.size(); ++i) {
    if (arenas[i]->Fits(feeds)) {
      Arena* a = arenas[i];
      arenas.erase(arenas.begin() + static_cast<std::ptrdiff_t>(i));
      return a;
    }
  }
  return nullptr;
}

void Graph::Plan::PutArena(Arena* a) const {
  std::lock_guard<std::mutex> lock(arena_mu);
  arenas.insert(arenas.begin(), a);
  if (static_cast<int>(arenas.size()) > kArenas) {
    delete arenas.back();
    arenas.pop_back();
  }
}

namespace {

using Source = Graph::Plan::Source;

// *out stays null where shapes depend on fed data (the run is lazy then).
Status BuildArena(const Graph::Plan& p, const Feeds& feeds, std::unique_ptr<Arena>* out) {
  auto a = std::make_unique<Arena>();
  const int nv = p.num_values, ns = static_cast<int>(p.steps.size());
  bool reshaped = p.dynamic;
  for (size_t i = 0; i < feeds.size(); ++i) {
    a->feed_shapes.push_back(feeds[i].second.shape());
    reshaped = reshaped || feeds[i].second.shape() != p.fed[i]->shapes[0];
  }
  std::vector<Tensor> known;
  if (reshaped) {
    std::shared_ptr<const SignatureShapes> sig;
    OF_RETURN_IF_ERROR(ShapesFor(p, feeds, &sig));
    if (!sig->complete) {
      out->reset();
      return Status::OK();
    }
    a->shapes = sig->values;
    known = sig->known;
  } else {
    a->shapes.resize(nv);
    for (int k = 0; k < ns; ++k) {
      for (int o = 0; o < p.steps[k].n_out; ++o) a->shapes[p.steps[k].offset + o] = p.steps[k].shapes[o];
    }
  }
  std::vector<char> aliasing;
  {
    std::lock_guard<std::mutex> lock(p.aliasing_mu);
    aliasing = p.aliasing;
  }
  aliasing.resize(ns, 0);

  // Steps whose outputs were all computed with the shapes: they never run.
  known.resize(nv);
  a->kept.assign(nv, 0);
  std::vector<char> precomputed(ns, 0);
  for (int k = 0; k < ns; ++k) {
    bool all = p.steps[k].n_out > 0;
    for (int o = 0; o < p.steps[k].n_out; ++o) all = all && known[p.steps[k].offset + o].valid();
    precomputed[k] = all;
    for (int o = 0; all && o < p.steps[k].n_out; ++o) a->kept[p.steps[k].offset + o] = 1;
  }
  // Per value: its step, dtype, bytes and last reader; whether it may live in a slot.
  std::vector<int> step_of(nv), end(nv);
  std::vector<DType> dtype(nv);
  std::vector<int64_t> bytes(nv);
  std::vector<char> pinned(nv, 0);  // never in the arena
  for (int k = 0; k < ns; ++k) {
    const Graph::Plan::Step& st = p.steps[k];
    for (int o = 0; o < st.n_out; ++o) {
      const int v = st.offset + o;
      step_of[v] = k;
      end[v] = k;
      dtype[v] = p.nodes[k]->dtypes[o];
      const int64_t n = a->shapes[v].num_elements(), size = static_cast<int64_t>(DTypeSize(dtype[v]));
      bytes[v] = n < kArenaLimitBytes / size ? n * size : kArenaLimitBytes;
      pinned[v] = st.fetched || aliasing[k] || bytes[v] >= kArenaLimitBytes || a->kept[v];
    }
    for (int j = st.src_begin; j < st.src_end; ++j) {
      const Source& s = p.step_sources[j];
      if (s.kind == Source::kNode) end[p.offset[s.index] + s.output] = k;
    }
  }
  // An aliasing step's inputs live as long as its outputs (later aliases
  // first, so chains of them extend all the way back); what a fetched alias
  // aliases is fetched too: it stays out of the arena.
  std::vector<char> escapes(nv, 0);
  for (int k = 0; k < ns; ++k) {
    for (int o = 0; o < p.steps[k].n_out; ++o) escapes[p.steps[k].offset + o] = p.steps[k].fetched;
  }
  for (int k = ns - 1; k >= 0; --k) {
    if (!aliasing[k]) continue;
    const Graph::Plan::Step& st = p.steps[k];
    int last = k;
    bool escape = false;
    for (int o = 0; o < st.n_out; ++o) {
      last = std::max(last, end[st.offset + o]);
      escape = escape || escapes[st.offset + o];
    }
    for (int j = st.src_begin; j < st.src_end; ++j) {
      const Source& s = p.step_sources[j];
      if (s.kind != Source::kNode) continue;
      const int u = p.offset[s.index] + s.output;
      end[u] = std::max(end[u], last);
      if (escape) pinned[u] = escapes[u] = 1;
    }
  }

  // Slots: a value takes a free slot (best fit, else the largest, grown) at
  // its step; the slot is free again from the step after its last reader.
  std::vector<int> slot_of(nv, -1);
  std::vector<int64_t> slot_size;
  std::vector<int> free_slots;
  std::vector<std::vector<int>> dies(ns);  // arena values by last reader
  for (int k = 0; k < ns; ++k) {
    if (k > 0) {
      for (int v : dies[k - 1]) free_slots.push_back(slot_of[v]);
    }
    const Graph::Plan::Step& st = p.steps[k];
    for (int o = 0; o < st.n_out; ++o) {
      const int v = st.offset + o;
      if (pinned[v]) continue;
      int best = -1;
      for (size_t f = 0; f < free_slots.size(); ++f) {
        const int64_t size = slot_size[free_slots[f]];
        const int64_t best_size = best < 0 ? -1 : slot_size[free_slots[best]];
        const bool fits = size >= bytes[v], best_fits = best >= 0 && best_size >= bytes[v];
        if (best < 0 || (fits && (!best_fits || size < best_size)) || (!fits && !best_fits && size > best_size)) {
          best = static_cast<int>(f);
        }
      }
      if (best >= 0) {
        slot_of[v] = free_slots[best];
        free_slots.erase(free_slots.begin() + best);
        slot_size[slot_of[v]] = std::max(slot_size[slot_of[v]], bytes[v]);
      } else {
        slot_of[v] = static_cast<int>(slot_size.size());
        slot_size.push_back(bytes[v]);
      }
      dies[end[v]].push_back(v);
    }
  }
  for (int64_t size : slot_size) {
    Tensor t;
    OF_RETURN_IF_ERROR(Tensor::Allocate(DType::kBool, TensorShape({size}), &t));
    a->slots.push_back(std::move(t));
    a->arena_bytes += size;
  }

  // Bind outputs and inputs; list what is bound per run and what is freed when.
  a->outs.resize(nv);
  a->expect.assign(nv, nullptr);
  for (int v = 0; v < nv; ++v) {
    if (a->kept[v]) a->outs[v] = known[v];
    if (slot_of[v] < 0) continue;
    TensorBuffer* buf = a->slots[slot_of[v]].buffer();
    a->outs[v] = Tensor(dtype[v], a->shapes[v], buf);
    a->expect[v] = buf;
  }
  std::vector<std::vector<int>> released(ns);
  for (int v = 0; v < nv; ++v) {
    if (slot_of[v] < 0 && !p.steps[step_of[v]].fetched && !a->kept[v]) released[end[v]].push_back(v);
  }
  a->ins.resize(p.step_sources.size());
  for (int k = 0; k < ns; ++k) {
    const Graph::Plan::Step& st = p.steps[k];
    Arena::Step rs;
    const OpDef& op = *st.op;
    const DType key = op.kernel_type_attr >= 0 ? st.attrs[op.kernel_type_attr].type : op.kernel_fixed_type;
    rs.fn = op.kernels->fn[kCPU][static_cast<int>(key)];
    rs.op = st.op;
    rs.attrs = st.attrs;
    rs.shapes = a->shapes.data() + st.offset;
    rs.in_begin = st.src_begin;
    rs.n_in = st.src_end - st.src_begin;
    rs.out_begin = st.offset;
    rs.n_out = st.n_out;
    rs.aliasing = aliasing[k] != 0;
    rs.precomputed = precomputed[k] != 0;
    rs.dyn_begin = static_cast<int>(a->dyn.size());
    for (int j = st.src_begin; j < st.src_end; ++j) {
      const Source& s = p.step_sources[j];
      if (s.kind == Source::kConst) {
        a->ins[j] = p.constants[s.index];
      } else if (s.kind == Source::kFeed) {
        a->dyn.push_back(Arena::Dyn{j, true, s.index});
      } else {
        const int u = p.offset[s.index] + s.output;
        if (slot_of[u] >= 0) {
          a->ins[j] = a->outs[u];
        } else {
          a->dyn.push_back(Arena::Dyn{j, false, u});
        }
      }
    }
    rs.dyn_end = static_cast<int>(a->dyn.size());
    rs.rel_begin = static_cast<int>(a->release.size());
    a->release.insert(a->release.end(), released[k].begin(), released[k].end());
    rs.rel_end = static_cast<int>(a->release.size());
    a->steps.push_back(rs);
  }
  *out = std::move(a);
  return Status::OK();
}

// True if `buf` is input `in`'s buffer and that is an arena slot.
bool IsSlot(const Arena& a, const Tensor& in, const TensorBuffer* buf) {
  if (in.buffer() != buf || buf == nullptr) return false;
  for (const Tensor& slot : a.slots) {
    if (slot.buffer() == buf) return true;
  }
  return false;
}

// True if t's memory lies in in's buffer (t aliases in, or a view of it).
bool SharesMemory(const Tensor& in, const Tensor& t) {
  const TensorBuffer* b = in.buffer();
  if (b == nullptr || t.buffer() == nullptr || b->size() == 0) return false;
  const char* lo = static_cast<const char*>(b->data());
  const char* at = static_cast<const char*>(t.buffer()->data());
  return t.buffer() == b || (at >= lo && at < lo + b->size());
}

// Later memory plans leave step k's outputs to its kernel.
void MarkAliasing(const Graph::Plan& p, int k) {
  std::lock_guard<std::mutex> lock(p.aliasing_mu);
  p.aliasing.resize(p.steps.size(), 0);
  p.aliasing[k] = 1;
}

Status StepError(const Graph::Plan& p, int k, const Status& s) {
  return s.WithPrefix(p.nodes[k]->op->name + ": ").WithPrefix(p.nodes[k]->Label() + ": ");
}

}  // namespace

Status RunInOrder(const Graph::Plan& p, const Feeds& feeds, std::vector<Tensor>* results, RunStats* stats) {
  std::unique_ptr<Arena> arena(p.TakeArena(feeds));
  if (!arena) {
    OF_RETURN_IF_ERROR(BuildArena(p, feeds, &arena));
    if (!arena) return RunLazily(p, feeds, results, stats);  // shapes that depend on fed data
  }
  Arena& a = *arena;
  bool aliased = false;  // a kernel handed out an unplanned buffer: no slot is written from here on
  int64_t live = 0, peak = 0;
  const int ns = static_cast<int>(a.steps.size());
  std::vector<StepTiming> timings;  // only while profiling (run_profile.h)
  const bool profiling = ProfilingRuns();
  for (int k = 0; k < ns; ++k) {
    const Arena::Step& rs = a.steps[k];
    Tensor* in = a.ins.data() + rs.in_begin;
    Tensor* out = a.outs.data() + rs.out_begin;
    if (rs.precomputed) {
      for (int r = rs.rel_begin; r < rs.rel_end; ++r) {
        live -= static_cast<int64_t>(a.outs[a.release[r]].TotalBytes());
        a.outs[a.release[r]] = Tensor();
      }
      continue;
    }
    if (!aliased) {
      for (int d = rs.dyn_begin; d < rs.dyn_end; ++d) {
        const Arena::Dyn& dy = a.dyn[d];
        a.ins[dy.slot] = dy.feed ? feeds[dy.index].second : a.outs[dy.index];
      }
    } else {
      // Plain mode: every input from where it is now, outputs allocated.
      const Graph::Plan::Step& st = p.steps[k];
      for (int j = st.src_begin; j < st.src_end; ++j) {
        const Source& s = p.step_sources[j];
        a.ins[j] = s.kind == Source::kFeed    ? feeds[s.index].second
                   : s.kind == Source::kConst ? p.constants[s.index]
                                              : a.outs[p.offset[s.index] + s.output];
      }
      for (int o = 0; o < rs.n_out; ++o) out[o] = Tensor();
    }
    if (rs.fn == nullptr) {  // RunKernel names the dtypes that have kernels
      return RunKernel(*rs.op, in, rs.n_in, rs.attrs, rs.shapes, out).WithPrefix(p.nodes[k]->Label() + ": ");
    }
    if (rs.op->stateful) CurrentRunState().node = &p.nodes[k]->name;  // Graph::Run set the resources
    OpKernelContext ctx(*rs.op, in, rs.n_in, rs.attrs, rs.shapes, out);
    if (!aliased) ctx.set_outputs_preallocated();
    std::chrono::steady_clock::time_point t0;
    if (profiling) t0 = std::chrono::steady_clock::now();
    Status s = rs.fn(&ctx);
    if (profiling) {
      const auto dt = std::chrono::steady_clock::now() - t0;
      timings.push_back({p.nodes[k]->name, rs.op->name, std::chrono::duration_cast<std::chrono::nanoseconds>(dt).count()});
    }
    if (s.ok() && !ctx.lookup_error().ok()) s = ctx.lookup_error();  // no string copy per node
    if (!s.ok()) return StepError(p, k, s);  // the arena (maybe half-rebound) is dropped
    for (int o = 0; o < rs.n_out; ++o) {
      Tensor& t = out[o];
      const int v = rs.out_begin + o;
      if (!t.valid()) {
        // Kernels may skip allocating outputs they never write (empty results).
        if (rs.shapes[o].num_elements() != 0) {
          return StepError(p, k, errors::Internal("the kernel did not produce output '", rs.op->outputs[o].name,
                                                  "'"));
        }
        OF_RETURN_IF_ERROR(Tensor::Allocate(OutputDType(*rs.op, o, rs.attrs), rs.shapes[o], &t));
      }
      bool unplanned;
      if (aliased) {
        // Plain mode allocated this output afresh: it aliases an input if it
        // shares memory with one. Noted now, so one run finds every aliasing
        // step (not one per run: a plan with 15 Reshapes took 15 slow runs).
        unplanned = false;
        for (int j = 0; j < rs.n_in && !rs.aliasing; ++j) unplanned = unplanned || SharesMemory(in[j], t);
        if (unplanned) MarkAliasing(p, k);
        if (a.expect[v] == nullptr) live += static_cast<int64_t>(t.TotalBytes());
        continue;
      }
      if (a.expect[v] != nullptr) {
        unplanned = t.buffer() != a.expect[v];
      } else {
        live += static_cast<int64_t>(t.TotalBytes());
        // Outside the arena (fetched, large): it must not be an input's slot.
        unplanned = false;
        for (int j = 0; j < rs.n_in && !rs.aliasing; ++j) unplanned = unplanned || IsSlot(a, in[j], t.buffer());
      }
      if (unplanned) {
        aliased = true;
        MarkAliasing(p, k);
      }
    }
    peak = std::max(peak, live);
    for (int d = rs.dyn_begin; d < rs.dyn_end; ++d) a.ins[a.dyn[d].slot] = Tensor();
    for (int r = rs.rel_begin; r < rs.rel_end; ++r) {
      live -= static_cast<int64_t>(a.outs[a.release[r]].TotalBytes());
      a.outs[a.release[r]] = Tensor();
    }
  }
  results->clear();
  for (const Source& s : p.fetches) {
    results->push_back(s.kind == Source::kFeed    ? feeds[s.index].second
                       : s.kind == Source::kConst ? p.constants[s.index]
                                                  : a.outs[p.offset[s.index] + s.output]);
  }
  if (profiling) RecordStepTimings(&timings);
  if (stats) {
    *stats = RunStats();
    stats->nodes_run = ns;
    stats->max_concurrent = ns > 0 ? 1 : 0;
    stats->peak_bytes = a.arena_bytes + peak;
  }
  if (aliased) return Status::OK();  // slots may be shared with what was handed out: plan afresh
  // The arena keeps no fetched value, nothing outside it, and no feed.
  for (int v = 0; v < static_cast<int>(a.outs.size()); ++v) {
    if (a.expect[v] == nullptr && !a.kept[v]) a.outs[v] = Tensor();
  }
  p.PutArena(arena.release());
  return Status::OK();
}

}  // namespace opforge
