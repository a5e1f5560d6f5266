// The MPI side of the collectives library: process state, the metadata
// handshake every collective does before its data moves, and waits bounded
// by a timeout. Kernels (mpi_kernels.cc) use only this and the public SDK.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>

#include "opforge/opforge.h"

namespace opforge {
namespace mpi {

// Fails unless opforge_mpi_init() ran (and no earlier collective timed out).
Status CheckReady();
int Rank();
int Size();
// MPI_COMM_WORLD's duplicate, whose errors return codes instead of aborting.
MPI_Comm Comm();
// A kernel's turn: collectives run one at a time in a process, and those the
// Python front queued by name (opforge_mpi_enqueue, in program order, the
// same on every rank) run in that order even when the async engine starts
// them out of order. A name not queued (graph runs, gradient ops) just waits
// for the lock. Held for the kernel's whole run. status() also says whether
// MPI is up (CheckReady), so a kernel's prologue is the turn and its status.
class Turn {
 public:
  explicit Turn(const std::string& name);
  ~Turn();
  const Status& status() const { return status_; }

 private:
  bool queued_ = false;
  bool locked_ = false;
  Status status_;
};

MPI_Datatype ToMpi(DType t);

// What one rank says about a collective before any data moves. `describe`
// names the tensor as the error message shows it; `key` is what must agree
// across ranks (e.g. without the first dim for allgather); `dim0` travels
// beside it (allgather's counts).
struct Meta {
  std::string key;
  std::string describe;
  int64_t dim0 = 0;
};

// All ranks exchange their Meta (bounded by the timeout). Every rank gets
// the same records, so a mismatch fails on every rank with one message
// naming `what` (the op and tensor name). dim0s receives every rank's dim0.
Status Handshake(const char* what, const Meta& mine, int64_t* dim0s);

// Waits for `req`, bounded by the timeout; `what` names the collective.
Status Wait(MPI_Request* req, const char* what);

// MPI error code -> Status naming the collective.
Status FromMpi(int code, const char* what);

}  // namespace mpi
}  // namespace opforge
