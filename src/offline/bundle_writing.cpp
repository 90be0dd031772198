#include "offline/bundle_writing.h"

#include "core/content_hash.h"
#include "offline/quant_recipe.h"
#include "tiers/bundle_layout.h"

namespace strata {

void set_bundle_metadata(GgufWriter& w, const Model& model, DType type) {
  for (const auto& [key, value] : model.file->metadata())
    if (key != "general.alignment") w.set(key, value);
  w.set(kFfnActivationKey, GgufValue::str(ffn_activation_name(model.config.ffn)));
  w.set(kBundleTypeKey, GgufValue::u32(static_cast<uint32_t>(type)));
  w.set(kBundleTypeNameKey, GgufValue::str(dtype_name(type)));
  w.set(kBundleSourceHashKey,
        GgufValue::str(content_hash_hex(model.file->bytes(), model.file->file_size())));
}

KeptTensors add_kept_tensors(GgufWriter& w, const Model& model) {
  KeptTensors kept;
  for (const auto& t : model.file->tensors()) {
    const TensorRole role = classify_tensor(t.name, t.dims.size()).role;
    if (role == TensorRole::FfnGate || role == TensorRole::FfnUp || role == TensorRole::FfnDown)
      continue;
    w.add_tensor(t.name, t.type, t.dims);
    kept.tensors.push_back(&t);
    kept.bytes += t.n_bytes;
  }
  return kept;
}

uint64_t write_kept_tensors(GgufWriter& w, const KeptTensors& kept) {
  uint64_t written = 0;
  for (const GgufTensorInfo* t : kept.tensors) {
    w.write_tensor_data({t->data, t->n_bytes});
    written += t->n_bytes;
  }
  return written;
}

}  // namespace strata
