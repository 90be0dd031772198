// A GGUF file's mixture name as llama.cpp v0.5.0 reports it ("Q4_K - Medium", "IQ4_XS - 4.25
// bpw"): general.file_type's name, or, where the key is absent, llama.cpp's guess from the most
// common tensor type, marked "(guessed)". A pure function of the key and the tensor types.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "tensor/dtype.h"

namespace strata {

// llama.cpp's name of a LLAMA_FTYPE number ("unknown, may not work" for others).
std::string file_type_name(uint32_t file_type);
// The name llama.cpp prints for a file: its general.file_type if set, else the guess from the
// type most of its tensors have (ties: the first seen, as llama.cpp counts them).
std::string file_mixture_name(std::optional<uint32_t> file_type, std::span<const DType> tensors);

}  // namespace strata
