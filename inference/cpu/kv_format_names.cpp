// The KV cache formats' names, as the command line, the app's settings and
// JSON reports spell them. Apart from the kernels in kv_cache.cpp so that a
// settings parser links without them.
#include "inference/cpu/kv_cache.h"

namespace cubeforge::cpu {

std::string_view kv_format_name(KvFormat format) {
  switch (format) {
    case KvFormat::kF32: return "f32";
    case KvFormat::kBF16: return "bf16";
    case KvFormat::kFp8: return "fp8";
    case KvFormat::kInt8: return "int8";
  }
  return "?";
}

std::optional<KvFormat> kv_format_from_name(std::string_view name) {
  for (KvFormat f : {KvFormat::kF32, KvFormat::kBF16, KvFormat::kFp8, KvFormat::kInt8})
    if (kv_format_name(f) == name) return f;
  return std::nullopt;
}

}  // namespace cubeforge::cpu
