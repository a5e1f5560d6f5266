// A dataflow graph of registered ops with static dtypes and shapes, and its
// execution on the engine (Session.run): prune to the fetches, run the
// nodes in dependency order, free each intermediate after its last reader.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine.h"

namespace opforge {

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
  std::vector<TensorShape> shapes;   // per output, static
  Tensor value;                      // kConstant only
  std::string Label() const;         // "node 'name' (Op, built at file:line)"
};

class Graph {
 public:
  int AddPlaceholder(std::string name, DType dtype, const TensorShape& shape, std::string where);
  int AddConstant(std::string name, Tensor value, std::string where);
  // Infers output dtypes and shapes (the op's usual errors, prefixed with the
  // node's label); on success appends the node and sets *id.
  Status AddOp(std::string name, const OpDef* op, std::vector<NodeOutput> inputs, std::vector<AttrValue> attrs,
               std::string where, int* id);

  // Copies of one node's public facts (nodes never change once added).
  const GraphNode& node(int id) const;
  int num_nodes() const;

  // Runs the nodes `fetches` need, given `feeds` (placeholder or any other
  // node id -> value). Feeds of a new shape re-infer shapes first, so bad
  // ones fail before any kernel runs. At most `inter_op` nodes at once.
  Status Run(const std::vector<std::pair<int, Tensor>>& feeds, const std::vector<NodeOutput>& fetches,
             int inter_op, std::vector<Tensor>* results, RunStats* stats);

 // The plan of one (fetches, feeds) signature (framework-internal: graph_plan.h).
  struct Plan;

 private:
  Status GetPlan(const std::vector<std::pair<int, Tensor>>& feeds, const std::vector<NodeOutput>& fetches,
                 std::shared_ptr<const Plan>* plan);

  mutable std::mutex mu_;
  std::deque<GraphNode> nodes_;  // deque: references stay valid as it grows
  std::map<std::string, std::shared_ptr<const Plan>> plans_;
};

}  // namespace opforge
