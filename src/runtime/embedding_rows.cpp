#include "runtime/embedding_rows.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace strata {

EmbeddingRows::EmbeddingRows(const Model& model) : model_(model) {
  const ModelWeights& w = model.weights;
  // Unless the output head shares it (then the table is in memory anyway).
  if (!(w.bundled || w.column_bundled) || w.token_embd.data == w.output.data) return;
  fd_ = ::open(model.file->path().c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) fail("cannot open '{}': {}", model.file->path(), std::strerror(errno));
  row_.resize(w.token_embd.row_bytes);
}

EmbeddingRows::~EmbeddingRows() {
  if (fd_ >= 0) ::close(fd_);
}

const uint8_t* EmbeddingRows::row(int32_t token) {
  const MatrixView& e = model_.weights.token_embd;
  if (fd_ < 0) return e.row(token);
  const uint64_t at = static_cast<uint64_t>(e.row(token) - model_.file->bytes());
  uint64_t done = 0;
  while (done < e.row_bytes) {
    const ssize_t n =
        ::pread(fd_, row_.data() + done, e.row_bytes - done, static_cast<off_t>(at + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      fail("cannot read the embedding of token {} from '{}': {}", token, model_.file->path(),
           n < 0 ? std::strerror(errno) : "the file is shorter than at load");
    done += static_cast<uint64_t>(n);
  }
  return row_.data();
}

}  // namespace strata
