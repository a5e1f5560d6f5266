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

  // The in-order runner's memory plan, kept between runs: taken by a run
  // (a concurrent second run of the plan builds its own) and put back.
  mutable std::atomic<Arena*> arena{nullptr};
  // Steps whose kernel handed out another buffer than the planned one (an
  // alias of an input: Identity, Reshape): later memory plans leave their
  // outputs to the kernel and keep what they alias alive as long.
  mutable std::mutex aliasing_mu;
  mutable std::vector<char> aliasing;
};

using Feeds = std::vector<std::pair<int, Tensor>>;

// Output shapes of every planned value given the fed shapes (re-inferred
// before any kernel runs, so a bad feed fails with nothing done).
Status ReinferShapes(const Graph::Plan& p, const Feeds& feeds, std::vector<TensorShape>* shapes);

// Runs the plan's steps in order on this thread, intermediates in a
// per-plan arena of reusable buffers (memory_plan.cc).
Status RunInOrder(const Graph::Plan& p, const Feeds& feeds, std::vector<Tensor>* results, RunStats* stats);

}  // namespace opforge
