// CPU kernels of the sparse table library: the table is a resource (see
// opforge/resource.h) holding a hash map id -> (row, Adagrad accumulator).
#include <cmath>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "opforge/opforge.h"

namespace opforge {
namespace {

class SparseTable : public ResourceBase {
 public:
  explicit SparseTable(int64_t dim) : dim_(dim) {}
  std::string DebugString() const override {
    return "SparseTable dim " + std::to_string(dim_) + ", " + std::to_string(rows_.size()) + " rows";
  }
  int64_t dim() const { return dim_; }

  struct Row {
    std::vector<float> value, acc;
  };
  // The row of `id`, or nullptr (hold mu()).
  Row* Find(int64_t id) {
    auto it = rows_.find(id);
    return it == rows_.end() ? nullptr : &it->second;
  }
  // The row of `id`, made from (seed, id) on first sight (hold mu()).
  Row& FindOrMake(int64_t id, uint64_t seed, float scale) {
    auto it = rows_.find(id);
    if (it != rows_.end()) return it->second;
    Row& row = rows_[id];
    row.value.resize(static_cast<size_t>(dim_));
    uint64_t state = seed * 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(id);
    for (float& v : row.value) v = static_cast<float>((2.0 * Uniform(&state) - 1.0) * scale);
    return row;
  }
  size_t size() const { return rows_.size(); }

 private:
  // splitmix64: a counter-based draw in [0, 1).
  static double Uniform(uint64_t* state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) * 0x1.0p-53;
  }

  const int64_t dim_;
  std::unordered_map<int64_t, Row> rows_;
};

Status CheckDim(const SparseTable& t, int64_t dim, const std::string& name) {
  if (t.dim() != dim) {
    return errors::InvalidArgument("table '", name, "' has rows of ", t.dim(), " but attr 'dim' is ", dim);
  }
  return Status::OK();
}

Status PullKernel(OpKernelContext* ctx) {
  const int64_t dim = ctx->attr_int("dim");
  std::shared_ptr<SparseTable> table;
  OF_RETURN_IF_ERROR(ctx->LookupOrCreateResource<SparseTable>(
      "table", &table, [dim](std::shared_ptr<SparseTable>* out) {
        *out = std::make_shared<SparseTable>(dim);
        return Status::OK();
      }));
  OF_RETURN_IF_ERROR(CheckDim(*table, dim, ctx->attr_string("table")));
  const Tensor& ids = ctx->input(0);
  Tensor* rows = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &rows));
  const int64_t* id = ids.data<int64_t>();
  float* out = rows->data<float>();
  const uint64_t seed = static_cast<uint64_t>(ctx->attr_int("seed"));
  const float scale = static_cast<float>(ctx->attr_float("init_scale"));
  std::lock_guard<std::mutex> lock(table->mu());
  for (int64_t i = 0; i < ids.NumElements(); ++i) {
    const SparseTable::Row& row = table->FindOrMake(id[i], seed, scale);
    for (int64_t j = 0; j < dim; ++j) out[i * dim + j] = row.value[j];
  }
  return Status::OK();
}

Status PushKernel(OpKernelContext* ctx) {
  const int64_t dim = ctx->attr_int("dim");
  const std::string& name = ctx->attr_string("table");
  std::shared_ptr<SparseTable> table;
  Status found = ctx->LookupResource<SparseTable>("table", &table);
  if (!found.ok()) {
    return errors::FailedPrecondition("table '", name, "' does not exist yet: pull its ids before pushing");
  }
  OF_RETURN_IF_ERROR(CheckDim(*table, dim, name));
  const Tensor& ids = ctx->input(0);
  const Tensor& grads = ctx->input(1);
  const int64_t* id = ids.data<int64_t>();
  const float* g = grads.data<float>();
  const float lr = static_cast<float>(ctx->attr_float("learning_rate"));
  const float acc0 = static_cast<float>(ctx->attr_float("initial_accumulator"));
  // Sum the gradients of repeated ids, in first-seen order.
  std::unordered_map<int64_t, size_t> slot;
  std::vector<int64_t> order;
  std::vector<float> sum;
  for (int64_t i = 0; i < ids.NumElements(); ++i) {
    auto it = slot.emplace(id[i], order.size());
    if (it.second) {
      order.push_back(id[i]);
      sum.resize(sum.size() + static_cast<size_t>(dim), 0.0f);
    }
    float* s = &sum[it.first->second * static_cast<size_t>(dim)];
    for (int64_t j = 0; j < dim; ++j) s[j] += g[i * dim + j];
  }
  std::lock_guard<std::mutex> lock(table->mu());
  std::vector<SparseTable::Row*> rows(order.size());
  for (size_t k = 0; k < order.size(); ++k) {  // all found before any changes: all or nothing
    rows[k] = table->Find(order[k]);
    if (rows[k] == nullptr) {
      return errors::FailedPrecondition("table '", name, "' has no row for id ", order[k],
                                        ": pull it before pushing its gradient");
    }
  }
  for (size_t k = 0; k < order.size(); ++k) {
    SparseTable::Row* row = rows[k];
    if (row->acc.empty()) row->acc.assign(static_cast<size_t>(dim), acc0);
    const float* s = &sum[k * static_cast<size_t>(dim)];
    for (int64_t j = 0; j < dim; ++j) {
      row->acc[j] += s[j] * s[j];
      row->value[j] -= lr * s[j] / std::sqrt(row->acc[j]);
    }
  }
  Tensor* updated = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &updated));
  *updated->data<int64_t>() = static_cast<int64_t>(order.size());
  return Status::OK();
}

Status SizeKernel(OpKernelContext* ctx) {
  std::shared_ptr<SparseTable> table;
  int64_t n = 0;
  if (ctx->LookupResource<SparseTable>("table", &table).ok()) {
    std::lock_guard<std::mutex> lock(table->mu());
    n = static_cast<int64_t>(table->size());
  }
  Tensor* size = nullptr;
  OF_RETURN_IF_ERROR(ctx->allocate_output(0, &size));
  *size->data<int64_t>() = n;
  return Status::OK();
}

}  // namespace

REGISTER_KERNEL("SparseTablePull", kCPU, DType::kInt64, PullKernel);
REGISTER_KERNEL("SparseTablePush", kCPU, DType::kInt64, PushKernel);
REGISTER_KERNEL("SparseTableSize", kCPU, DType::kInt64, SizeKernel);

}  // namespace opforge
