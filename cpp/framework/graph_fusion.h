// The elementwise fusion pass, run when a graph is planned (Graph::GetPlan):
// maximal trees of float elementwise nodes whose intermediates nothing else
// reads (no other node, no fetch, no control dependency) become one
// FusedElementwise node (cpp/ops/fused_elementwise_ops.cc) that runs them as
// one loop over the data.
//
// It rewrites the plan's view of the graph, never the graph: the nodes it
// makes live in the FusedNodes it returns (which the plan keeps), each at the
// id of the tree's root, reading the tree's outside inputs. Gradients are
// built on the graph before any plan exists, so the fused op needs none.
// OPFORGE_GRAPH_FUSION=0 turns it off (for A/B runs).
#pragma once

#include <deque>
#include <memory>
#include <unordered_map>
#include <vector>

#include "graph.h"

namespace opforge {

struct FusedNodes {
  std::deque<GraphNode> nodes;                // the fused nodes (references stay valid)
  std::unordered_map<int, const GraphNode*> at;  // root node id -> its fused node

  // The node the plan runs at `id`.
  const GraphNode& Node(int id, const GraphNode& original) const {
    auto it = at.find(id);
    return it == at.end() ? original : *it->second;
  }
};

// Fuses the nodes of `graph` marked in *needed (feed_of[id] >= 0: fed, not
// computed); absorbed nodes are cleared from *needed. Null when nothing fused.
std::shared_ptr<const FusedNodes> FuseElementwise(const std::deque<GraphNode>& graph, const std::vector<int>& feed_of,
                                                  const std::vector<NodeOutput>& fetches, std::vector<char>* needed);

}  // namespace opforge
