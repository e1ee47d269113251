// How an op stores a result in an output buffer: overwrite it (the buffer's contents, NaN
// included, are never read: a fresh activation gradient needs no zeroing) or accumulate into it
// (+=: parameter gradients, and activation gradients that several branches feed).
#pragma once

namespace gmlp {

enum class Write { overwrite, accumulate };

}  // namespace gmlp
