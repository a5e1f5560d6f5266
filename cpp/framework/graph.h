// A dataflow graph of registered ops with static dtypes and shapes, and its
// execution on the engine (Session.run): prune to the fetches, run the
// nodes in dependency order, free each intermediate after its last reader.
//
// It is the only graph store: Python's Graph, Operation and SymbolicTensor
// are views (a handle, a node id, an output index) that read every fact
// here. Shapes may hold unknown dims (kUnknownDim, -1), from placeholders
// like [None, 784]; shape functions take them as unknown.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "bind.h"
#include "engine.h"

namespace opforge {

// Graph::Run's inter_op for a Session's default: in plan order where most
// nodes are large enough to split over the intra-op threads themselves,
// else up to the inter-op pool's size at once.
inline constexpr int kAutoInterOp = -1;

struct NodeOutput {
  int node = -1;
  int index = 0;
};

struct GraphNode {
  enum Kind { kOp, kPlaceholder, kConstant };
  Kind kind = kOp;
  std::string name;
  std::string where;                 // the Python file:line that built it
  const OpDef* op = nullptr;         // kOp only
  std::vector<AttrValue> attrs;      // complete (inferred and defaults filled)
  std::vector<NodeOutput> inputs;    // flattened, as Execute takes them
  std::vector<DType> dtypes;         // per output
  std::vector<TensorShape> shapes;   // per output, static; -1 where a dim is unknown
  // Per output whose rank is unknown (a placeholder without a shape, and
  // what reads it); empty when every rank is known. Its `shapes` entry is
  // [-1], which no concrete shape equals, so every run re-infers shapes.
  std::vector<bool> unknown_rank;
  bool RankUnknown(int o) const { return o < static_cast<int>(unknown_rank.size()) && unknown_rank[o]; }
  Tensor value;                      // kConstant only (read-only: kernels cannot write it)
  // Nodes that must run before this one although it reads none of their
  // outputs (opforge.control_dependencies); always earlier ids.
  std::vector<int> control_inputs;
  std::string Label() const;         // "node 'name' (Op, built at file:line)"
};

class Graph {
 public:
  // Each Add* names the node `base`, or `base_N` when that is taken (the
  // first free N), as TensorFlow does. Placeholder dims may be -1 (unknown).
  // `unknown_rank`: `shape` is ignored, any rank may be fed.
  int AddPlaceholder(const std::string& base, DType dtype, const TensorShape& shape, std::string where,
                     bool unknown_rank = false);
  int AddConstant(const std::string& base, Tensor value, std::string where);
  // Infers output dtypes and shapes (the op's usual errors, prefixed with the
  // node's label); on success appends the node and sets *id.
  Status AddOp(const std::string& base, const OpDef* op, std::vector<NodeOutput> inputs,
               std::vector<AttrValue> attrs, std::string where, int* id);
  // Adds a node of a call the binder bound (bind.h): its completed attrs,
  // output dtypes and shapes are the node's. `inputs` are the flattened
  // slots' nodes (symbolic slots' own, constants added for values);
  // `name` comes from UniqueName.
  int AddBound(std::string name, const BoundCall& call, std::vector<NodeOutput> inputs, std::string where);
  // The control dependencies every node added from now on gets (the
  // innermost opforge.control_dependencies scope); ids must exist.
  Status SetControlDeps(std::vector<int> deps);
  std::vector<int> ControlDeps() const;
  // A name no node has yet, reserved: `base`, else `base_1`, `base_2`...
  std::string UniqueName(const std::string& base);

  // One node's facts (nodes never change once added; the reference stays valid).
  const GraphNode& node(int id) const;
  int num_nodes() const;
  // Per node, the nodes reading its outputs (once per input edge).
  std::vector<std::vector<int>> Consumers() const;

  // Runs the nodes `fetches` need (with their control inputs), given `feeds`
  // (placeholder or any other node id -> value). Feeds of a new shape
  // re-infer shapes first, so bad ones fail before any kernel runs. At most
  // `inter_op` nodes at once (kAutoInterOp: see RunPlan). Stateful ops keep their state in `resources`
  // (the Session's); the planned stateful ops naming one resource run in the
  // order they were added. Feeds and constants are passed to kernels
  // read-only, and a result that would share their memory is a copy.
  Status Run(const std::vector<std::pair<int, Tensor>>& feeds, const std::vector<NodeOutput>& fetches,
             int inter_op, std::vector<Tensor>* results, RunStats* stats, ResourceMgr* resources = nullptr);

 // The plan of one (fetches, feeds) signature (framework-internal: graph_plan.h).
  struct Plan;

 private:
  Status GetPlan(const std::vector<std::pair<int, Tensor>>& feeds, const std::vector<NodeOutput>& fetches,
                 std::shared_ptr<const Plan>* plan);

  std::string UniqueNameLocked(const std::string& base);
  Status RunPlan(const Plan& p, const std::vector<std::pair<int, Tensor>>& feeds, int inter_op,
                 std::vector<Tensor>* results, RunStats* stats, ResourceMgr* resources);

  mutable std::mutex mu_;
  std::deque<GraphNode> nodes_;  // deque: references stay valid as it grows
  std::vector<int> control_deps_;  // given to each new node
  std::unordered_map<std::string, int> name_uses_;  // base -> how many names were made from it
  std::map<std::string, std::shared_ptr<const Plan>> plans_;
};

}  // namespace opforge
