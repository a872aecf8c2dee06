// Device memory a library call borrows from its device's context, as plain
// functions so the library wrappers need no context: the stream's workspace
// (grown to the largest size asked, kept), and scratch blocks for an
// algorithm search, handed back to the caching allocator when released.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>

namespace dtrain {

// A block of `bytes`, or null when the allocator cannot give that much (a
// search then asks for less).
using ScratchMemory = std::function<std::shared_ptr<void>(size_t bytes)>;

struct LibraryMemory {
  std::function<void*(size_t bytes)> workspace;  // valid until the next call
  ScratchMemory scratch;
};

}  // namespace dtrain
