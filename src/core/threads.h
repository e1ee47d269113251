// Thread count for everything parallel: our OpenMP loops and oneDNN (built on the same GNU
// OpenMP runtime, so one setting governs both).
#pragma once

namespace gmlp {

// n <= 0 picks the default: the number of cores the process may use.
void set_threads(int n);
int num_threads();

}  // namespace gmlp
