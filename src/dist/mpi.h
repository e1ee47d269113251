// The communicator of an MPI job (dist/communicator.h), for the command line built with MPI.
#pragma once

#include <memory>
#include <string>

#include "dist/communicator.h"

namespace gmlp::dist {

// Initialises MPI (MPI_Init_thread: only the main thread calls MPI) and returns MPI_COMM_WORLD's
// communicator; MPI is finalised when it is destroyed. Throws a one-line gmlp::Error if MPI fails.
std::unique_ptr<Communicator> mpi_world(int* argc, char*** argv);

// The MPI library's name and version ("Open MPI v4.1.4"), callable before MPI is initialised.
std::string mpi_library();

}  // namespace gmlp::dist
