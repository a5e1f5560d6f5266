// The elementwise fusion pass (graph_fusion.h): group, then compile each
// group into a FusedElementwise program.
#include "graph_fusion.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <utility>

#include "opforge/fused_elementwise.h"
#include "opforge/registry.h"

namespace opforge {
namespace {

using namespace fused;  // NOLINT(build/namespaces)

// Ops per fused node at most: keeps the registers (one cached block each) few.
constexpr int kMaxOps = 32;

// The ops the pass fuses and their opcodes (Pow only with a scalar constant exponent).
int64_t OpcodeOf(const std::string& op) {
  static const std::map<std::string, int64_t> table = {
      {"Neg", kNeg},     {"Abs", kAbs},         {"Square", kSquare}, {"Relu", kRelu},       {"Exp", kExp},
      {"Log", kLog},     {"Sqrt", kSqrt},       {"Tanh", kTanh},     {"Sigmoid", kSigmoid}, {"Gelu", kGelu},
      {"Sin", kSin},     {"Cos", kCos},         {"Add", kAdd},       {"Sub", kSub},         {"Mul", kMul},
      {"Div", kDiv},     {"Maximum", kMaximum}, {"Minimum", kMinimum}, {"Pow", kPowConst}};
  auto it = table.find(op);
  return it == table.end() ? -1 : it->second;
}

bool IsFloat(DType t) { return t == DType::kFloat32 || t == DType::kFloat64; }

class Fuser {
 public:
  Fuser(const std::deque<GraphNode>& g, const std::vector<int>& feed_of, const std::vector<char>& needed)
      : g_(g), feed_of_(feed_of), needed_(needed) {}

  // A one-element constant of dtype t (not fed): its value, as a double (exact for float32).
  bool ScalarConstant(const NodeOutput& o, DType t, double* v) const {
    const GraphNode& c = g_[o.node];
    if (c.kind != GraphNode::kConstant || feed_of_[o.node] >= 0 || c.value.dtype() != t ||
        c.value.NumElements() != 1) {
      return false;
    }
    *v = t == DType::kFloat32 ? static_cast<double>(c.value.data<float>()[0]) : c.value.data<double>()[0];
    return true;
  }

  bool Fusable(int id) const {
    const GraphNode& node = g_[id];
    if (!needed_[id] || feed_of_[id] >= 0 || node.kind != GraphNode::kOp || node.op->stateful) return false;
    const int64_t code = OpcodeOf(node.op->name);
    if (code < 0 || node.dtypes.size() != 1 || !IsFloat(node.dtypes[0]) || node.RankUnknown(0)) return false;
    const size_t arity = IsUnary(code) ? 1 : 2;
    if (node.inputs.size() != arity) return false;
    for (const NodeOutput& in : node.inputs) {
      if (g_[in.node].dtypes[in.index] != node.dtypes[0]) return false;
    }
    double e;
    return code != kPowConst || ScalarConstant(node.inputs[1], node.dtypes[0], &e);
  }

  // Compiles the group (ids ascending, root last) into `out`; false when it
  // is not worth a node or needs too many registers.
  bool Compile(const std::vector<int>& members, const OpDef* op, GraphNode* out) const {
    const GraphNode& root = g_[members.back()];
    const DType t = root.dtypes[0];
    std::map<int, int> member_of;  // node id -> position in members
    for (size_t i = 0; i < members.size(); ++i) member_of[members[i]] = static_cast<int>(i);
    // Values by key: a member (its id), an outside input (-1 - index into
    // `inputs`) or a constant (-1000000 - index into `constants`).
    std::vector<NodeOutput> inputs;
    std::vector<double> constants;
    std::map<std::pair<int, int>, int64_t> input_key;
    std::map<int64_t, int> uses;
    auto key_of = [&](const NodeOutput& o) -> int64_t {
      if (member_of.count(o.node)) return o.node;
      double v;
      if (ScalarConstant(o, t, &v)) {
        constants.push_back(v);
        return -1000000 - static_cast<int64_t>(constants.size() - 1);
      }
      auto it = input_key.find({o.node, o.index});
      if (it != input_key.end()) return it->second;
      inputs.push_back(o);
      return input_key[{o.node, o.index}] = -1 - static_cast<int64_t>(inputs.size() - 1);
    };
    // Operand keys per member, and how often each key is read.
    std::vector<std::vector<int64_t>> operands(members.size());
    for (size_t i = 0; i < members.size(); ++i) {
      const GraphNode& m = g_[members[i]];
      const bool pow = OpcodeOf(m.op->name) == kPowConst;
      for (size_t k = 0; k < m.inputs.size(); ++k) {
        if (pow && k == 1) {  // the exponent: a constant index, not a register
          double v;
          ScalarConstant(m.inputs[1], t, &v);
          constants.push_back(v);
          operands[i].push_back(static_cast<int64_t>(constants.size() - 1));
          continue;
        }
        const int64_t key = key_of(m.inputs[k]);
        operands[i].push_back(key);
        ++uses[key];
      }
    }
    if (inputs.empty() || static_cast<int>(inputs.size()) > kMaxRegisters / 2) return false;
    // Registers: taken at a value's first definition, freed after its last read.
    std::vector<int64_t> prog;
    std::map<int64_t, int> reg;
    std::vector<int> free_regs;
    int num_regs = 0;
    auto take = [&]() {
      if (!free_regs.empty()) {
        const int r = free_regs.back();
        free_regs.pop_back();
        return r;
      }
      return num_regs++;
    };
    auto operand = [&](int64_t key) -> int64_t {
      auto it = reg.find(key);
      if (it != reg.end()) return it->second;
      const int r = take();  // a leaf's first read: load it
      if (key <= -1000000) prog.insert(prog.end(), {kConst, r, -1000000 - key, 0});
      else prog.insert(prog.end(), {kInput, r, -1 - key, 0});
      return reg[key] = r;
    };
    auto release = [&](int64_t key) {  // a constant keeps its register: the kernel loads it once
      if (--uses[key] == 0 && key > -1000000) free_regs.push_back(reg[key]);
    };
    for (size_t i = 0; i < members.size(); ++i) {
      const int64_t code = OpcodeOf(g_[members[i]].op->name);
      const std::vector<int64_t>& ops = operands[i];
      const int64_t a = operand(ops[0]);
      const int64_t b = code == kPowConst ? ops[1] : ops.size() > 1 ? operand(ops[1]) : 0;
      release(ops[0]);
      if (code != kPowConst && ops.size() > 1) release(ops[1]);
      const int dst = take();
      reg[members[i]] = dst;
      prog.insert(prog.end(), {code, dst, a, b});
    }
    if (num_regs > kMaxRegisters) return false;

    out->kind = GraphNode::kOp;
    out->name = root.name;
    out->where = root.where;
    out->op = op;
    out->inputs = inputs;
    out->dtypes = root.dtypes;
    out->shapes = root.shapes;
    out->unknown_rank = root.unknown_rank;
    for (int id : members) {
      const GraphNode& m = g_[id];
      out->control_inputs.insert(out->control_inputs.end(), m.control_inputs.begin(), m.control_inputs.end());
    }
    std::sort(out->control_inputs.begin(), out->control_inputs.end());
    out->control_inputs.erase(std::unique(out->control_inputs.begin(), out->control_inputs.end()),
                              out->control_inputs.end());
    for (const AttrDef& a : op->attrs) {
      if (a.name == "N") out->attrs.push_back(AttrValue::Int(static_cast<int64_t>(inputs.size())));
      else if (a.name == "program") out->attrs.push_back(AttrValue::IntList(prog));
      else if (a.name == "constants") out->attrs.push_back(AttrValue::FloatList(constants));
      else if (a.name == "T") out->attrs.push_back(AttrValue::Type(t));
      else return false;
    }
    return true;
  }

 private:
  const std::deque<GraphNode>& g_;
  const std::vector<int>& feed_of_;
  const std::vector<char>& needed_;
};

}  // namespace

std::shared_ptr<const FusedNodes> FuseElementwise(const std::deque<GraphNode>& graph, const std::vector<int>& feed_of,
                                                  const std::vector<NodeOutput>& fetches, std::vector<char>* needed) {
  if (const char* env = std::getenv("OPFORGE_GRAPH_FUSION")) {
    if (std::strcmp(env, "0") == 0) return nullptr;
  }
  static const OpDef* const op = OpRegistry::Global()->Find("FusedElementwise");
  if (op == nullptr) return nullptr;
  const int n = static_cast<int>(graph.size());
  // Who reads each node among those that run, and which nodes are fetched or
  // ordered against (control dependencies): those must keep their own node.
  std::vector<std::vector<int>> consumers(n);
  std::vector<char> pinned(n, 0);
  for (int id = 0; id < n; ++id) {
    const GraphNode& node = graph[id];
    if (!(*needed)[id] || feed_of[id] >= 0 || node.kind != GraphNode::kOp) continue;
    for (const NodeOutput& in : node.inputs) consumers[in.node].push_back(id);
    for (int c : node.control_inputs) pinned[c] = 1;
  }
  for (const NodeOutput& f : fetches) pinned[f.node] = 1;

  // Reverse topological order: a node joins its consumers' group when every
  // read of it is from that one group and it has the group's shape; else it
  // starts a group of its own.
  Fuser fuser(graph, feed_of, *needed);
  std::vector<int> group(n, -1), size(n, 0);
  for (int id = n - 1; id >= 0; --id) {
    if (!fuser.Fusable(id)) continue;
    int g = -1;
    bool join = !pinned[id] && !consumers[id].empty();
    for (int c : consumers[id]) {
      if (!join) break;
      join = group[c] >= 0 && (g < 0 || group[c] == g);
      g = group[c];
    }
    if (join && graph[id].shapes[0] == graph[g].shapes[0] && size[g] < kMaxOps) {
      group[id] = g;
      ++size[g];
    } else {
      group[id] = id;
      size[id] = 1;
    }
  }
  std::map<int, std::vector<int>> members;  // root -> members, ascending
  for (int id = 0; id < n; ++id) {
    if (group[id] >= 0 && size[group[id]] >= 2) members[group[id]].push_back(id);
  }
  if (members.empty()) return nullptr;
  auto result = std::make_shared<FusedNodes>();
  for (const auto& [root, ids] : members) {
    GraphNode node;
    if (!fuser.Compile(ids, op, &node)) continue;
    result->nodes.push_back(std::move(node));
    result->at[root] = &result->nodes.back();
    for (int id : ids) {
      if (id != root) (*needed)[id] = 0;
    }
  }
  if (result->at.empty()) return nullptr;
  return result;
}

}  // namespace opforge
