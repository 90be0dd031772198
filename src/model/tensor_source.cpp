#include "model/tensor_source.h"

#include "core/error.h"

namespace strata {

TensorSource::TensorSource(const GgufFile& file)
    : file_(file), claimed_(file.tensors().size(), false) {}

const GgufTensorInfo* TensorSource::find_tensor(const std::string& name) {
  const GgufTensorInfo* t = file_.find_tensor(name);
  if (t != nullptr) claimed_[static_cast<size_t>(t - file_.tensors().data())] = true;
  return t;
}

int TensorSource::accept_unused(const std::string& name) {
  return find_tensor(name) != nullptr ? 1 : 0;
}

int TensorSource::accept_unused_prefix(const std::string& prefix) {
  int count = 0;
  const auto& tensors = file_.tensors();
  for (size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].name.starts_with(prefix)) claimed_[i] = true, ++count;
  return count;
}

void TensorSource::check_all_claimed(const std::string& architecture) const {
  size_t first = claimed_.size(), count = 0;
  for (size_t i = 0; i < claimed_.size(); ++i)
    if (!claimed_[i]) {
      if (count++ == 0) first = i;
    }
  if (count == 0) return;
  const std::string more = count > 1 ? fmt::format(" (and {} more)", count - 1) : "";
  fail(
      "'{}' has the tensor '{}'{}, which strata does not read for architecture {}: refusing to "
      "run the model without it",
      path(), file_.tensors()[first].name.substr(0, 96), more, architecture.substr(0, 64));
}

}  // namespace strata
