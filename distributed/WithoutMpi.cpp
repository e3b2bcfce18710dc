// The data-parallel group in a kiln built without MPI (KILN_MPI off; see DataParallel.h): it
// cannot be made, so nothing else here runs.
#include "core/Error.h"
#include "distributed/DataParallel.h"

namespace kiln::distributed {

bool mpiAvailable() { return false; }

struct DataParallelGroup::Impl {};

DataParallelGroup::DataParallelGroup(DataParallelOptions options) : options_(options) {
  fail("data-parallel training is unavailable: this kiln was built without MPI (install libopenmpi-dev and configure with "
       "-DKILN_MPI=ON)");
}

DataParallelGroup::~DataParallelGroup() = default;

int DataParallelGroup::rank() const { return 0; }
int DataParallelGroup::size() const { return 1; }
void DataParallelGroup::broadcastFromRank0(runtime::TrainingStep &) {}
void DataParallelGroup::planGradients(const runtime::TrainingStep &) {}
void DataParallelGroup::gradientReady(size_t, const Tensor &) {}
void DataParallelGroup::progress() {}
void DataParallelGroup::sumGradients(std::vector<Tensor> &) {}
const AllreduceStats &DataParallelGroup::lastAllreduce() const {
  static const AllreduceStats none;
  return none;
}
const AllreduceStats &DataParallelGroup::allreduceStats() const { return lastAllreduce(); }
void DataParallelGroup::sum(std::vector<double> &) {}
void DataParallelGroup::broadcastBuffers(runtime::TrainingStep &) {}
uint64_t DataParallelGroup::checkIdentical(const runtime::TrainingStep &step) { return parameterChecksum(step); }

} // namespace kiln::distributed
