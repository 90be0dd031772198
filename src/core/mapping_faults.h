// A file mapped into memory can shrink under the process (another program truncates or rewrites
// it while `strata serve --mmap` runs): a read of a page past its new end raises SIGBUS, which
// killed the process without a word. Mappings registered here turn that fault into a one-line
// error naming the file, and the process exits with status 74 (EX_IOERR): what it was computing
// cannot go on, but the user learns why. A SIGBUS elsewhere keeps its default action.
#pragma once

#include <cstdint>
#include <string>

namespace strata {

constexpr int kMappingFaultExitCode = 74;

// Registers [begin, begin + size) as the mapping of `path` (up to 64 at once; more are not
// watched). The handler is installed with the first.
void watch_mapping(const void* begin, uint64_t size, const std::string& path);
void unwatch_mapping(const void* begin);

}  // namespace strata
