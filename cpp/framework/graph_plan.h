// What Graph::Run works from (framework-internal): the plan of one (fetches,
// feeds) signature, and the in-order runner with its static memory plan
// (memory_plan.cc).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "graph.h"

namespace opforge {

struct Arena;  // memory_plan.cc
struct FusedNodes;  // graph_fusion.h

// The shapes of one feed-shape signature of a dynamic plan (shape_plan.cc).
struct SignatureShapes {
  std::vector<TensorShape> feeds;   // the fed shapes they were inferred from
  std::vector<TensorShape> values;  // per planned value
  std::vector<Tensor> known;        // per value: shape tensors computed on the way (invalid elsewhere)
  bool complete = true;             // false: some shape depends on fed data (runs are lazy)
};

struct Graph::Plan {
  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan();

  // Where one input of a planned op comes from.
  struct Source {
    enum Kind { kNode, kFeed, kConst } kind;
    int index;                  // plan index, feed index or constant slot
    int output;
    const GraphNode* constant;  // kConst
  };
  std::vector<const GraphNode*> nodes;  // the ops to run, in topological order
  std::vector<std::vector<Source>> sources;
  std::vector<int> num_deps;
  std::vector<std::vector<int>> consumers;
  std::vector<int> uses;        // input edges that read each planned op
  std::vector<char> fetched;    // outputs of this op are fetched: never freed early
  std::vector<Source> fetches;
  std::vector<const GraphNode*> fed;  // per feed, the node it replaces
  std::vector<int> offset;      // of each op's first output in the run's flat value array
  int num_values = 0;
  bool serial = false;          // never two nodes ready at once: run in order, no scheduling
  // At least half the steps write kLargeStepBytes or more: kernels that split
  // over the intra-op threads themselves (a CNN's convolutions). A Session's
  // default inter-op setting (kAutoInterOp) runs such a plan in order.
  bool large_steps = false;
  static constexpr int64_t kLargeStepBytes = int64_t{64} << 10;
  // What running a node reads, packed per op in plan order (a run touches
  // these few cache lines per node, not the GraphNode's).
  struct Step {
    const OpDef* op;
    const AttrValue* attrs;
    const TensorShape* shapes;
    int src_begin, src_end;     // into step_sources
    int offset, n_out;
    char fetched;
  };
  std::vector<Step> steps;
  std::vector<Source> step_sources;
  std::vector<Tensor> constants;  // kConst sources index this
  std::shared_ptr<const FusedNodes> fused;  // the fused nodes `nodes` may point to (graph_fusion.h)

  // Some planned op's static shape has unknown dims (from a placeholder's
  // None dims or a shape tensor computed at run time): every run's shapes
  // are inferred from its feeds (once per feed-shape signature).
  bool dynamic = false;

  // The in-order runner's memory plans, one per feed-shape signature (the
  // most recently used first, at most kArenas): a run takes the one that
  // fits its feeds (a concurrent second run builds its own) and puts it back.
  static constexpr int kArenas = 8;
  mutable std::mutex arena_mu;
  mutable std::vector<Arena*> arenas;
  Arena* TakeArena(const std::vector<std::pair<int, Tensor>>& feeds) const;
  void PutArena(Arena* a) const;
  // The shapes inferred per feed-shape signature (the most recently used
  // first, at most kArenas), for both runners: a repeated signature is never
  // re-inferred, however sizes alternate.
  mutable std::mutex shapes_mu;
  mutable std::vector<std::shared_ptr<const SignatureShapes>> signature_shapes;
  // Steps whose kernel handed out another buffer than the planned one (an
  // alias of an input: Identity, Reshape): later memory plans leave their
  // outputs to the kernel and keep what they alias alive as long.
  mutable std::mutex aliasing_mu;
  mutable std::vector<char> aliasing;
};

using Feeds = std::vector<std::pair<int, Tensor>>;

// Output shapes of every planned value given the fed shapes (re-inferred
// before any kernel runs, so a bad feed fails with nothing done). Shape
// tensors that follow from the fed shapes alone (Shape, and small ops of
// known values: the Shape -> Gather -> Concat -> ReshapeTo chains of
// exported models) are computed on the way, so their readers get concrete
// shapes; `known` (if given) receives them per value (invalid elsewhere).
// *complete is false where some dim still depends on a value computed from
// fed data (then each op is inferred as it runs: RunLazily).
Status ReinferShapes(const Graph::Plan& p, const Feeds& feeds, std::vector<TensorShape>* shapes,
                     std::vector<Tensor>* known = nullptr, bool* complete = nullptr);

// ReinferShapes once per feed-shape signature: the plan's cached result for
// these feeds' shapes, inferred (and cached) on a miss. Errors are not cached.
Status ShapesFor(const Graph::Plan& p, const Feeds& feeds, std::shared_ptr<const SignatureShapes>* out);

// Runs the plan in order, inferring each op's output shapes from its
// inputs' values just before it runs (no memory plan).
Status RunLazily(const Graph::Plan& p, const Feeds& feeds, std::vector<Tensor>* results, RunStats* stats);

// A tensor sharing t's storage that kernels may not write (graph.cc).
Tensor ReadOnly(const Tensor& t);

// Runs the plan's steps in order on this thread, intermediates in a
// per-plan arena of reusable buffers (memory_plan.cc).
Status RunInOrder(const Graph::Plan& p, const Feeds& feeds, std::vector<Tensor>* results, RunStats* stats);

}  // namespace opforge
