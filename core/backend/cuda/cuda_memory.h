// Device memory for the caching allocator: cudaMalloc and cudaFree on one
// device, an out-of-memory answered with nullptr (so the cache can make room
// and retry), any other failure thrown.
#pragma once
#include "core/backend/caching_allocator.h"

namespace dtrain {

RawAllocator cudaRawAllocator(int device);

}  // namespace dtrain
