// Which KV cache options can run (see gpt_kv_cache.h). Apart from the cache
// in gpt_kv_cache.cpp so that a settings parser links without the model.
#include "inference/model/gpt_kv_cache.h"

namespace cubeforge {

Status check_kv_cache_options(const KvCacheOptions& options) {
  if (options.budget < 0 || options.budget == 1)
    return make_error(ErrorCode::kInvalidArgument, "a KV budget keeps BOS and at least one more position: give 2 or more slots (0: keep all)");
  if (options.budget > 0 && options.format == cpu::KvFormat::kInt8)
    return make_error(ErrorCode::kInvalidArgument,
                      "eviction rewrites cache slots, but the INT8 (KIVI) cache quantises keys in blocks of 32 "
                      "slots that stay as they are; use --kv-budget with --kv-cache f32, bf16 or fp8");
  return ok_status();
}

}  // namespace cubeforge
