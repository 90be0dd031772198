// Files as the user names them. Inputs: only regular files are opened, so a FIFO, a device
// (/dev/zero) or a directory given where a file is expected is a one-line error instead of an
// open that blocks forever, a read that never ends or an empty text. Files read whole have a
// size limit that names the file.
#pragma once

#include <cstdint>
#include <string>

namespace strata {

// A descriptor of the regular file `path` opened with O_RDONLY | O_CLOEXEC | `extra_flags`
// (the caller closes it), or Error ("cannot open", "is not a regular file"). The open itself
// never blocks: a FIFO is opened non-blocking and refused. `size`, when given, receives the
// file's size.
int open_regular_file(const std::string& path, int extra_flags = 0, uint64_t* size = nullptr);

// The whole content of the regular file `path`, or Error when it is not one or is larger than
// `max_bytes` (`what` names the content in the message: "text", "tokenizer.json").
std::string read_regular_file(const std::string& path, uint64_t max_bytes, const char* what);

// True when `path` exists and is a regular file (stat only: nothing is opened).
bool is_regular_file(const std::string& path);

// Outputs: fails when `path` exists and is not a regular file (a device such as /dev/full, a
// FIFO, a directory, or a link to one), so that no output replaces or blocks on one.
void refuse_special_output(const std::string& path);

// Writes `text` to the regular file `path` (created or replaced), or Error naming it.
void write_text_file(const std::string& path, const std::string& text);

constexpr uint64_t kMaxTextFileBytes = uint64_t{1} << 30;    // texts read whole (perplexity, ...)
constexpr uint64_t kMaxJsonFileBytes = uint64_t{256} << 20;  // JSON read whole (tokenizer.json)

}  // namespace strata
