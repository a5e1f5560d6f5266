// Process state, the pre-collective handshake and bounded waits (mpi_comm.h),
// plus the C entry points opforge.distributed calls through ctypes (init,
// finalize, timeout): the control plane; data moves only through the ops.
#include "mpi_comm.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <cstring>
#include <sstream>
#include <thread>
#include <vector>

namespace opforge {
namespace mpi {
namespace {

struct State {
  bool ready = false;
  bool we_initialized = false;
  int rank = 0, size = 1, local_rank = 0, local_size = 1;
  double timeout_s = 60.0;
  std::string broken;  // set once a collective timed out: MPI state is unusable
  MPI_Comm comm = MPI_COMM_NULL;
};

State& S() {
  static State s;
  return s;
}

// One record per rank in the handshake: fixed size, so one MPI_Iallgather.
struct Record {
  uint64_t hash;
  int64_t dim0;
  char describe[240];
};

uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

thread_local std::string last_error;

}  // namespace

Status CheckReady() {
  if (!S().ready) {
    return errors::InvalidArgument("opforge.distributed.init() was not called in this process");
  }
  if (!S().broken.empty()) {
    return errors::Internal("an earlier collective failed (", S().broken,
                            "); the processes are out of step: restart them");
  }
  return Status::OK();
}

int Rank() { return S().rank; }
int Size() { return S().size; }
MPI_Comm Comm() { return S().comm; }

struct Queue {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::string> names;
  bool busy = false;  // a collective is running
};

Queue& Q() {
  static Queue q;
  return q;
}

Turn::Turn(const std::string& name) {
  Queue& q = Q();
  std::unique_lock<std::mutex> lock(q.mu);
  queued_ = !name.empty() && std::find(q.names.begin(), q.names.end(), name) != q.names.end();
  const auto ready = [&] { return !q.busy && (!queued_ || q.names.front() == name); };
  if (!q.cv.wait_for(lock, std::chrono::duration<double>(S().timeout_s), ready)) {
    status_ = errors::Internal("tensor '", name, "': waited ", S().timeout_s, " s for the collectives queued before ",
                               "it (", q.names.empty() ? std::string("none") : "next: '" + q.names.front() + "'",
                               "); did one of them fail before it ran?");
    queued_ = false;
    return;
  }
  q.busy = locked_ = true;
  status_ = CheckReady();
}

Turn::~Turn() {
  if (!locked_) return;
  Queue& q = Q();
  {
    std::lock_guard<std::mutex> lock(q.mu);
    if (queued_) q.names.pop_front();
    q.busy = false;
  }
  q.cv.notify_all();
}

MPI_Datatype ToMpi(DType t) {
  switch (t) {
    case DType::kFloat32: return MPI_FLOAT;
    case DType::kFloat64: return MPI_DOUBLE;
    case DType::kInt32: return MPI_INT32_T;
    case DType::kInt64: return MPI_INT64_T;
    case DType::kBool: return MPI_C_BOOL;
    default: return MPI_DATATYPE_NULL;
  }
}

Status FromMpi(int code, const char* what) {
  if (code == MPI_SUCCESS) return Status::OK();
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  S().broken = std::string(what) + ": MPI error: " + std::string(text, len);
  return errors::Internal(what, ": MPI failed (a peer process may have died): ", std::string(text, len));
}

Status Wait(MPI_Request* req, const char* what) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto limit = std::chrono::duration<double>(S().timeout_s);
  for (uint64_t spin = 0;; ++spin) {
    int done = 0;
    OF_RETURN_IF_ERROR(FromMpi(MPI_Test(req, &done, MPI_STATUS_IGNORE), what));
    if (done) return Status::OK();
    // Poll hot for a moment (a peer that is almost there), then yield the
    // core between polls: a collective queued in async mode waits on a pool
    // thread while this process's backward pass computes on the others (or
    // on the same core), and a spinning wait took their time. After 20 ms,
    // sleep between polls (the peers may share the core), still often
    // enough for MPI's progress.
    if (spin >= 1024) std::this_thread::yield();
    if ((spin & 255) == 0) {
      const auto waited = Clock::now() - start;
      if (waited > limit) {
        std::ostringstream os;
        os << what << ": timed out after " << S().timeout_s << " s waiting for the other processes (rank "
           << S().rank << " of " << S().size << "); a process has died, raised, or did not call this collective";
        S().broken = os.str();
        return errors::Internal(os.str());
      }
      if (waited > std::chrono::milliseconds(20)) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

Status Handshake(const char* what, const Meta& mine, int64_t* dim0s) {
  Record rec{};
  rec.hash = Fnv1a(mine.key);
  rec.dim0 = mine.dim0;
  std::strncpy(rec.describe, mine.describe.c_str(), sizeof(rec.describe) - 1);
  std::vector<Record> all(static_cast<size_t>(S().size));
  MPI_Request req;
  OF_RETURN_IF_ERROR(FromMpi(MPI_Iallgather(&rec, sizeof(Record), MPI_BYTE, all.data(), sizeof(Record), MPI_BYTE,
                                            S().comm, &req),
                             what));
  OF_RETURN_IF_ERROR(Wait(&req, what));
  bool same = true;
  for (const Record& r : all) same = same && r.hash == all[0].hash;
  if (dim0s != nullptr) {
    for (int i = 0; i < S().size; ++i) dim0s[i] = all[i].dim0;
  }
  if (same) return Status::OK();
  std::ostringstream os;
  os << what << ": the processes disagree on the tensor before any data moved (shape, dtype, name and attrs "
     << "must match on every rank):";
  for (int i = 0; i < S().size; ++i) os << (i ? ";" : "") << " rank " << i << " has " << all[i].describe;
  return errors::InvalidArgument(os.str());
}

}  // namespace mpi
}  // namespace opforge

using opforge::mpi::S;
using opforge::mpi::Q;

extern "C" {

// 0 on success; else see opforge_mpi_last_error().
__attribute__((visibility("default"))) int opforge_mpi_init(double timeout_s) {
  auto& s = S();
  if (timeout_s > 0) s.timeout_s = timeout_s;
  if (s.ready) return 0;
  int inited = 0, finalized = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&finalized);
  if (finalized) {
    opforge::mpi::last_error = "MPI was already finalized in this process";
    return 1;
  }
  if (!inited) {
    int provided = 0;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
      opforge::mpi::last_error = "MPI_Init_thread failed";
      return 1;
    }
    s.we_initialized = true;
  }
  MPI_Comm_dup(MPI_COMM_WORLD, &s.comm);
  // Errors come back as codes (turned into opforge errors), not aborts.
  MPI_Comm_set_errhandler(s.comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(s.comm, &s.rank);
  MPI_Comm_size(s.comm, &s.size);
  MPI_Comm local;
  MPI_Comm_split_type(s.comm, MPI_COMM_TYPE_SHARED, s.rank, MPI_INFO_NULL, &local);
  MPI_Comm_rank(local, &s.local_rank);
  MPI_Comm_size(local, &s.local_size);
  MPI_Comm_free(&local);
  s.ready = true;
  return 0;
}

__attribute__((visibility("default"))) const char* opforge_mpi_last_error() {
  return opforge::mpi::last_error.c_str();
}

// Fills rank, size, local_rank, local_size; -1s before init.
__attribute__((visibility("default"))) void opforge_mpi_topology(int* out) {
  auto& s = S();
  out[0] = s.ready ? s.rank : -1;
  out[1] = s.ready ? s.size : -1;
  out[2] = s.ready ? s.local_rank : -1;
  out[3] = s.ready ? s.local_size : -1;
}

// The Python front queues each collective's name before it calls the op (see
// Turn); unqueue takes back the last entry of a name whose call did not run
// (it raised, or it added a graph node).
__attribute__((visibility("default"))) void opforge_mpi_enqueue(const char* name) {
  std::lock_guard<std::mutex> lock(opforge::mpi::Q().mu);
  opforge::mpi::Q().names.emplace_back(name);
}

__attribute__((visibility("default"))) void opforge_mpi_unqueue(const char* name) {
  auto& q = opforge::mpi::Q();
  {
    std::lock_guard<std::mutex> lock(q.mu);
    for (auto it = q.names.end(); it != q.names.begin();) {
      if (*--it == name) {
        q.names.erase(it);
        break;
      }
    }
  }
  q.cv.notify_all();
}

__attribute__((visibility("default"))) void opforge_mpi_set_timeout(double timeout_s) { S().timeout_s = timeout_s; }

// Finalizes MPI if this library initialized it. After a failed collective the
// peers are out of step and MPI_Finalize could wait forever: skip it (the
// launcher then ends the other processes).
__attribute__((visibility("default"))) int opforge_mpi_finalize() {
  auto& s = S();
  if (!s.ready) return 0;
  s.ready = false;
  if (!s.broken.empty()) return 1;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return 0;
  MPI_Comm_free(&s.comm);
  if (s.we_initialized) MPI_Finalize();
  return 0;
}

}  // extern "C"
