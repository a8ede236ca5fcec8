// The bf16, fp8 and int8 KV cache forms on the device against the CPU's own
// (inference/cpu/kv_cache.h): the stores give the bf16 bits, or the codes,
// scales and int8 residual, of cpu::kv_store bit for bit (the prefill's store kernel and the
// decode attention's fused prologue, across the int8 key blocks' boundaries),
// and decode and prefill attention over the stored cache agree with
// cpu::kv_attention over the CPU's cache within 1e-5. Under a KV budget the
// decode attention and kv_budget_update keep the slots, positions and
// accumulated attention of the CPU's LayerKvCache.
#include "inference/cpu/kv_cache.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "cuda_test_support.h"
#include "inference/cpu_backend/gpt_kv_cache.h"
#include "inference/cuda/attention.h"
#include "inference/cuda/kv_cache.h"
#include "inference/cuda/norm.h"

namespace cubeforge::cuda::testing {
namespace {

// Both sides attend over the same widened keys and values in f32; only
// summation orders differ.
constexpr double kStoredAttentionTolerance = 1e-5;

// What the fused prologue computes first, as qk_norm_rope_cache_write's
// arguments: from raw q | k | v rows ([batch, 3·heads·head_dim]), the
// normalised, rotated query and the exact key and value in an f32 cache.
QkNormRopeArgs exact_rope_args(int batch, int heads, int head_dim, const float* raw_qkv, const float* query_norm,
                               const float* key_norm, const int* position, float* query_out, float* key_cache,
                               float* value_cache, int cache_capacity) {
  const int width = heads * head_dim;
  QkNormRopeArgs rope;
  rope.batch = batch;
  rope.heads = heads;
  rope.head_dim = head_dim;
  rope.query = raw_qkv;
  rope.query_stride = 3 * width;
  rope.key = raw_qkv + width;
  rope.key_stride = 3 * width;
  rope.value = raw_qkv + 2 * width;
  rope.value_stride = 3 * width;
  rope.query_norm_weight = query_norm;
  rope.key_norm_weight = key_norm;
  rope.position = position;
  rope.query_out = query_out;
  rope.cache_type = DType::kF32;
  rope.key_cache = key_cache;
  rope.value_cache = value_cache;
  rope.cache_capacity = cache_capacity;
  return rope;
}

KvFormat cpu_format(KvCacheForm form) {
  switch (form) {
    case KvCacheForm::kBF16:
      return KvFormat::kBF16;
    case KvCacheForm::kFp8:
      return KvFormat::kFp8;
    default:
      return KvFormat::kInt8;
  }
}

// The forms kv_cache_store writes.
constexpr KvCacheForm kStoredForms[] = {KvCacheForm::kBF16, KvCacheForm::kFp8, KvCacheForm::kInt8};

bool same_bits(float a, float b) { return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b); }

// A device cache of one form, [batch, heads, capacity, head_dim], with its scales.
struct DeviceKvCache {
  KvCacheForm form;
  int batch, heads, head_dim, capacity;
  DeviceBuffer<unsigned char> keys, values;
  DeviceBuffer<float> key_scales, value_scales, key_residual;

  KvCacheScales scales() {
    return {key_scales.data(), value_scales.data(), key_residual.size() ? key_residual.data() : nullptr};
  }
};

Result<DeviceKvCache> make_cache(KvCacheForm form, int batch, int heads, int head_dim, int capacity) {
  const KvCacheSizes sizes = kv_cache_sizes(form, batch, heads, head_dim, capacity);
  DeviceKvCache cache{form, batch, heads, head_dim, capacity, {}, {}, {}, {}, {}};
  CUBEFORGE_ASSIGN_OR_RETURN(cache.keys, DeviceBuffer<unsigned char>::allocate(sizes.code_bytes, "keys"));
  CUBEFORGE_ASSIGN_OR_RETURN(cache.values, DeviceBuffer<unsigned char>::allocate(sizes.code_bytes, "values"));
  CUBEFORGE_ASSIGN_OR_RETURN(cache.key_scales, DeviceBuffer<float>::allocate(sizes.key_scales, "key scales"));
  CUBEFORGE_ASSIGN_OR_RETURN(cache.value_scales, DeviceBuffer<float>::allocate(sizes.value_scales, "value scales"));
  if (sizes.key_residual) {
    CUBEFORGE_ASSIGN_OR_RETURN(cache.key_residual, DeviceBuffer<float>::allocate(sizes.key_residual, "residual"));
  }
  // Garbage where nothing was stored: a read of an unwritten slot shows.
  CUBEFORGE_TRY(cache.keys.fill_bytes(0x7f));
  CUBEFORGE_TRY(cache.values.fill_bytes(0x7f));
  if (cache.key_scales.size()) CUBEFORGE_TRY(cache.key_scales.fill_bytes(0xff));
  if (cache.value_scales.size()) CUBEFORGE_TRY(cache.value_scales.fill_bytes(0xff));
  if (cache.key_residual.size()) CUBEFORGE_TRY(cache.key_residual.fill_bytes(0xff));
  return cache;
}

// Expects the device cache's slots [0, length) of every (batch row, head) to
// hold what the CPU's stores (one per batch row) hold, bit for bit.
void expect_cache_equals_cpu(DeviceKvCache& cache, const std::vector<cpu::KvStore>& stores, int length) {
  const int H = cache.heads, D = cache.head_dim, C = cache.capacity, W = H * D;
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto keys, cache.keys.download());
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto values, cache.values.download());
  if (cache.form == KvCacheForm::kBF16) {
    // Two bytes per element, the same layout: every byte of slots [0, length) equals the CPU's.
    const auto byte = [&](const std::vector<std::byte>& host, int slot, int h, int d, int half) {
      return std::to_integer<unsigned char>(host[(std::size_t(slot) * W + h * D + d) * 2 + half]);
    };
    int mismatches = 0;
    for (int b = 0; b < cache.batch; ++b)
      for (int h = 0; h < H; ++h)
        for (int slot = 0; slot < length; ++slot)
          for (int d = 0; d < D; ++d)
            for (int half = 0; half < 2; ++half) {
              const std::size_t device = (((std::size_t(b) * H + h) * C + slot) * D + d) * 2 + half;
              const cpu::KvStore& s = stores[std::size_t(b)];
              if (keys[device] == byte(s.keys, slot, h, d, half) && values[device] == byte(s.values, slot, h, d, half))
                continue;
              if (++mismatches <= 5)
                ADD_FAILURE() << "bf16 bits at batch " << b << " head " << h << " slot " << slot << " channel " << d;
            }
    EXPECT_EQ(mismatches, 0);
    return;
  }
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto key_scales, cache.key_scales.download());
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto value_scales, cache.value_scales.download());
  std::vector<float> residual;
  if (cache.key_residual.size()) {
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(residual, cache.key_residual.download());
  }
  const int blocks = (C + cpu::kInt8KeyBlock - 1) / int(cpu::kInt8KeyBlock);
  int mismatches = 0;
  auto mismatch = [&](const std::string& what) {
    if (++mismatches <= 5) ADD_FAILURE() << what;
  };
  for (int b = 0; b < cache.batch; ++b) {
    const cpu::KvStore& s = stores[std::size_t(b)];
    const int quantized = int(s.quantized_slots);
    if (cache.form == KvCacheForm::kInt8) {
      EXPECT_EQ(quantized, length / 32 * 32) << "the CPU's quantised slots";
    }
    for (int h = 0; h < H; ++h) {
      const std::size_t row_head = std::size_t(b) * H + h;
      for (int slot = 0; slot < length; ++slot) {
        const std::string at =
            "batch " + std::to_string(b) + " head " + std::to_string(h) + " slot " + std::to_string(slot);
        if (!same_bits(value_scales[row_head * C + slot], s.value_scales[std::size_t(slot * H + h)]))
          mismatch("value scale at " + at);
        if (cache.form == KvCacheForm::kFp8 &&
            !same_bits(key_scales[row_head * C + slot], s.key_scales[std::size_t(slot * H + h)]))
          mismatch("key scale at " + at);
        for (int d = 0; d < D; ++d) {
          const std::size_t device = (row_head * C + slot) * D + d, host = std::size_t(slot) * W + h * D + d;
          if (values[device] != std::to_integer<unsigned char>(s.values[host]))
            mismatch("value code at " + at + " channel " + std::to_string(d));
          const bool coded = cache.form == KvCacheForm::kFp8 || slot < quantized;
          if (coded && keys[device] != std::to_integer<unsigned char>(s.keys[host]))
            mismatch("key code at " + at + " channel " + std::to_string(d));
          if (!coded && !same_bits(residual[(row_head * 32 + slot % 32) * D + d],
                                   s.key_residual[std::size_t((slot - quantized) * W + h * D + d)]))
            mismatch("key residual at " + at + " channel " + std::to_string(d));
        }
      }
      if (cache.form != KvCacheForm::kInt8) continue;
      for (int block = 0; block < quantized / 32; ++block)
        for (int d = 0; d < D; ++d)
          if (!same_bits(key_scales[(row_head * blocks + block) * D + d],
                         s.key_scales[std::size_t(block * W + h * D + d)]))
            mismatch("key block scale at batch " + std::to_string(b) + " head " + std::to_string(h) + " block " +
                     std::to_string(block) + " channel " + std::to_string(d));
    }
  }
  EXPECT_EQ(mismatches, 0);
}

// Rows as the CPU takes them ([W] per slot) from a cache-layout array [B, H, C, D].
std::vector<float> slot_row(const std::vector<float>& cache_layout, int b, int slot, int H, int C, int D) {
  std::vector<float> row(std::size_t(H) * D);
  for (int h = 0; h < H; ++h)
    std::memcpy(row.data() + std::size_t(h) * D, cache_layout.data() + ((std::size_t(b) * H + h) * C + slot) * D,
                std::size_t(D) * sizeof(float));
  return row;
}

// Keys and values [B, H, C, D] with the cases a store must get right: a
// zero head (scale 0), an outlier channel, tiny values (fp8 subnormals), and
// bf16 ties (a value halfway between two bf16 values, its last kept bit odd
// or even: nearest even rounds them apart).
std::vector<float> cache_rows(int B, int H, int C, int D, std::uint32_t seed) {
  auto rows = random_floats(std::size_t(B) * H * C * D, seed, -2.0f, 2.0f);
  for (int slot = 0; slot < C; ++slot) {
    float* head = rows.data() + (std::size_t(H - 1) * C + slot) * D;  // batch row 0, last head
    if (slot % 7 == 3) std::fill(head, head + D, 0.0f);
    if (slot % 5 == 1) head[slot % D] = 40.0f;
    if (slot % 11 == 4) head[(slot + 1) % D] *= 1e-4f;
    if (slot % 3 == 2) {
      float* tie = rows.data() + slot * std::size_t(D);  // batch row 0, head 0
      for (int d = 0; d < D; d += 2)
        tie[d] = std::bit_cast<float>((std::bit_cast<std::uint32_t>(tie[d]) & 0xffff0000u) | 0x8000u);
    }
  }
  return rows;
}

// The CPU's stores of slots [0, length), one per batch row, from a
// cache-layout array [B, H, C, D] of keys and of values.
std::vector<cpu::KvStore> cpu_stores(KvCacheForm form, const std::vector<float>& keys,
                                     const std::vector<float>& values, int B, int H, int C, int D, int length) {
  std::vector<cpu::KvStore> stores;
  for (int b = 0; b < B; ++b) {
    stores.emplace_back(cpu_format(form), C, H, D);
    for (int slot = 0; slot < length; ++slot)
      cpu::kv_store(stores.back(), slot, slot_row(keys, b, slot, H, C, D).data(),
                    slot_row(values, b, slot, H, C, D).data());
  }
  return stores;
}

// kv_cache_store's arguments for copying float32 rows [B, H, C, D] into
// `cache` (of the same capacity); the caller sets first_slot and count.
KvCacheStoreArgs store_args(DeviceKvCache& cache, const DeviceBuffer<float>& keys, const DeviceBuffer<float>& values) {
  KvCacheStoreArgs store;
  store.batch = cache.batch;
  store.heads = cache.heads;
  store.head_dim = cache.head_dim;
  store.source_keys = keys.data();
  store.source_values = values.data();
  store.source_capacity = cache.capacity;
  store.form = cache.form;
  store.key_cache = cache.keys.data();
  store.value_cache = cache.values.data();
  store.scales = cache.scales();
  store.cache_capacity = cache.capacity;
  return store;
}

class KvCacheKernels : public CudaTest {};

TEST_F(KvCacheKernels, Fp8CodesEqualTheCpu) {
  std::vector<float> inputs = {0.0f,          -0.0f,      std::numeric_limits<float>::quiet_NaN(),
                               1e30f,         -1e30f,     1e-30f,
                               463.99f,       464.0f,     447.9f,
                               480.0f,        0.015625f,  0.0156249f,
                               0.0009765625f, 0.00097656f};
  for (int code = 0; code < 256; ++code) {
    const float value = cpu::fp8_e4m3_to_f32(std::uint8_t(code));
    if (std::isnan(value)) continue;
    inputs.push_back(value);
    const float next = cpu::fp8_e4m3_to_f32(std::uint8_t(code + 1 == 0x7F || code + 1 == 0xFF ? code : code + 1));
    const float middle = value + (next - value) / 2;  // ties round to even
    for (float x : {middle, std::nextafter(middle, 0.0f), std::nextafter(middle, 1e9f), std::nextafter(middle, -1e9f)})
      inputs.push_back(x);
  }
  std::vector<std::uint8_t> expected(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) expected[i] = cpu::fp8_e4m3_from_f32(inputs[i]);
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto input, upload(inputs, "inputs"));
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto output, DeviceBuffer<unsigned char>::allocate(inputs.size(), "codes"));
  CUBEFORGE_ASSERT_OK(fp8_e4m3_encode(input.data(), output.data(), int(inputs.size()), nullptr));
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto codes, output.download());
  for (std::size_t i = 0; i < inputs.size(); ++i)
    EXPECT_EQ(int(codes[i]), int(expected[i]))
        << "fp8 code of " << inputs[i] << " (bits 0x" << std::hex << std::bit_cast<std::uint32_t>(inputs[i]) << ")";
}

// The prefill's store, in two calls (the second continues a partly filled
// int8 block), against cpu::kv_store slot by slot; then prefill attention
// over the stored cache against cpu::kv_attention.
TEST_F(KvCacheKernels, StoreAndPrefillAttentionEqualTheCpu) {
  constexpr int kBatch = 2, kHeads = 3, kCapacity = 72;
  // Head sizes between the powers of two the kernels are built for, and 256, at fewer lengths.
  const std::vector<std::pair<int, std::vector<int>>> head_dims_and_lengths = {
      {32, {1, 31, 32, 33, 70}}, {64, {1, 31, 32, 33, 70}}, {48, {31, 33}}, {96, {70}}, {256, {33}}};
  for (const KvCacheForm form : kStoredForms)
    for (const auto& [head_dim, lengths] : head_dims_and_lengths)
      for (const int length : lengths) {
        SCOPED_TRACE(std::string(kv_cache_form_name(form)) + " head_dim " + std::to_string(head_dim) + " length " +
                     std::to_string(length));
        const int D = head_dim, W = kHeads * D;
        const auto keys = cache_rows(kBatch, kHeads, kCapacity, D, 41 + length);
        const auto values = cache_rows(kBatch, kHeads, kCapacity, D, 42 + length);
        const auto stores = cpu_stores(form, keys, values, kBatch, kHeads, kCapacity, D, length);

        CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto source_keys, upload(keys, "source keys"));
        CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto source_values, upload(values, "source values"));
        CUBEFORGE_ASSERT_OK_AND_ASSIGN(DeviceKvCache cache, make_cache(form, kBatch, kHeads, D, kCapacity));
        KvCacheStoreArgs store = store_args(cache, source_keys, source_values);
        const int first_part = length / 2 + 1 < length ? length / 2 + 1 : length;
        store.first_slot = 0;
        store.count = first_part;
        CUBEFORGE_ASSERT_OK(kv_cache_store(store, nullptr));
        store.first_slot = first_part;
        store.count = length - first_part;
        CUBEFORGE_ASSERT_OK(kv_cache_store(store, nullptr));
        CUBEFORGE_ASSERT_OK(synchronize_device());
        ASSERT_NO_FATAL_FAILURE(expect_cache_equals_cpu(cache, stores, length));

        // Causal prefill rows over the stored cache: row i sees slots [0, base + i + 1).
        const int rows = std::min(length, 4), base = length - rows;
        const auto queries = random_floats(std::size_t(kBatch) * rows * W, 43 + length, -1.5f, 1.5f);
        const float scale = 1.0f / std::sqrt(float(D));
        std::vector<float> expected(queries.size());
        for (int b = 0; b < kBatch; ++b)
          for (int i = 0; i < rows; ++i) {
            const std::size_t at = (std::size_t(b) * rows + i) * W;
            cpu::kv_attention(stores[std::size_t(b)], queries.data() + at, kHeads, scale, base + i + 1,
                              expected.data() + at, nullptr);
          }
        CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto query_device, upload(queries, "queries"));
        CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto output, DeviceBuffer<float>::allocate(queries.size(), "output"));
        AttentionPrefillArgs attention;
        attention.batch = kBatch;
        attention.heads = kHeads;
        attention.head_dim = D;
        attention.query = query_device.data();
        attention.query_rows = rows;
        attention.causal_base = base;
        attention.kv_length = length;
        attention.cache_form = form;
        attention.key_cache = cache.keys.data();
        attention.value_cache = cache.values.data();
        attention.cache_scales = cache.scales();
        attention.cache_capacity = kCapacity;
        attention.output = output.data();
        CUBEFORGE_ASSERT_OK(attention_prefill(attention, nullptr));
        CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto actual, output.download());
        EXPECT_LT(normalised_error(actual, expected), kStoredAttentionTolerance);
      }
}

// Decode steps with the fused prologue (norm, RoPE and the store of the new
// slot) across int8 block boundaries: each step's output against
// cpu::kv_attention after cpu::kv_store of the same key (the exact key and
// query from qk_norm_rope_cache_write, which shares the prologue's
// arithmetic), and the whole cache against the CPU's at the end.
TEST_F(KvCacheKernels, FusedDecodeStoresAndAttendsAsTheCpu) {
  constexpr int kBatch = 2, kHeads = 2, kCapacity = 72, kPrefilled = 29, kSteps = 6;  // slots 29..34: block 0 fills
  for (const KvCacheForm form : kStoredForms)
    for (const int head_dim : {16, 64, 48, 160}) {
      SCOPED_TRACE(std::string(kv_cache_form_name(form)) + " head_dim " + std::to_string(head_dim));
      const int D = head_dim, W = kHeads * D, stride = 3 * W;
      const auto keys = cache_rows(kBatch, kHeads, kCapacity, D, 51);
      const auto values = cache_rows(kBatch, kHeads, kCapacity, D, 52);
      const auto q_norm = random_floats(D, 53, 0.5f, 1.5f), k_norm = random_floats(D, 54, 0.5f, 1.5f);
      auto stores = cpu_stores(form, keys, values, kBatch, kHeads, kCapacity, D, kPrefilled);
      CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto source_keys, upload(keys, "source keys"));
      CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto source_values, upload(values, "source values"));
      CUBEFORGE_ASSERT_OK_AND_ASSIGN(DeviceKvCache cache, make_cache(form, kBatch, kHeads, D, kCapacity));
      KvCacheStoreArgs store = store_args(cache, source_keys, source_values);
      store.count = kPrefilled;
      CUBEFORGE_ASSERT_OK(kv_cache_store(store, nullptr));

      CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto q_norm_device, upload(q_norm, "q norm"));
      CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto k_norm_device, upload(k_norm, "k norm"));
      CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto position, DeviceBuffer<int>::allocate(1, "position"));
      CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto exact_query, DeviceBuffer<float>::allocate(std::size_t(kBatch) * W, "q"));
      CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto exact_keys,
                                     DeviceBuffer<float>::allocate(std::size_t(kBatch) * W * kCapacity, "k"));
      CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto exact_values,
                                     DeviceBuffer<float>::allocate(std::size_t(kBatch) * W * kCapacity, "v"));
      CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto output, DeviceBuffer<float>::allocate(std::size_t(kBatch) * W, "output"));
      const std::size_t workspace_bytes = attention_decode_workspace_bytes(kBatch, kHeads, D, kCapacity, 32);
      CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto workspace, DeviceBuffer<float>::allocate(workspace_bytes / 4, "workspace"));
      CUBEFORGE_ASSERT_OK(attention_decode_reset_workspace(workspace.data(), kBatch, kHeads, nullptr));
      const float scale = 1.0f / std::sqrt(float(D));

      for (int step = 0; step < kSteps; ++step) {
        const int slot = kPrefilled + step;
        SCOPED_TRACE("slot " + std::to_string(slot));
        const auto raw = random_floats(std::size_t(kBatch) * stride, 60 + step, -2.0f, 2.0f);
        CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto raw_device, upload(raw, "raw qkv"));
        CUBEFORGE_ASSERT_OK(position.upload(std::vector<int>{slot}));
        // The exact query and key, as the prologue computes them.
        QkNormRopeArgs rope = exact_rope_args(kBatch, kHeads, D, raw_device.data(), q_norm_device.data(),
                                              k_norm_device.data(), position.data(), exact_query.data(),
                                              exact_keys.data(), exact_values.data(), kCapacity);
        CUBEFORGE_ASSERT_OK(qk_norm_rope_cache_write(rope, nullptr));
        CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto query, exact_query.download());
        CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto key_layout, exact_keys.download());
        std::vector<float> expected(std::size_t(kBatch) * W);
        for (int b = 0; b < kBatch; ++b) {
          cpu::kv_store(stores[std::size_t(b)], slot, slot_row(key_layout, b, slot, kHeads, kCapacity, D).data(),
                        raw.data() + std::size_t(b) * stride + 2 * W);
          cpu::kv_attention(stores[std::size_t(b)], query.data() + std::size_t(b) * W, kHeads, scale, slot + 1,
                            expected.data() + std::size_t(b) * W, nullptr);
        }

        AttentionDecodeArgs args;
        args.batch = kBatch;
        args.heads = kHeads;
        args.head_dim = D;
        args.cache_form = form;
        args.key_cache = cache.keys.data();
        args.value_cache = cache.values.data();
        args.cache_scales = cache.scales();
        args.cache_capacity = kCapacity;
        args.position = position.data();
        args.length_offset = 1;
        args.raw_qkv = raw_device.data();
        args.raw_stride = stride;
        args.query_norm_weight = q_norm_device.data();
        args.key_norm_weight = k_norm_device.data();
        args.write_position = position.data();
        args.output = output.data();
        args.workspace = workspace.data();
        args.workspace_bytes = workspace_bytes;
        args.keys_per_split = 32;
        CUBEFORGE_ASSERT_OK(attention_decode(args, nullptr));
        CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto actual, output.download());
        EXPECT_LT(normalised_error(actual, expected), kStoredAttentionTolerance);
      }
      CUBEFORGE_ASSERT_OK(synchronize_device());
      ASSERT_NO_FATAL_FAILURE(expect_cache_equals_cpu(cache, stores, kPrefilled + kSteps));
    }
}

TEST_F(KvCacheKernels, Int8CacheNeedsSplitsOfWholeKeyBlocks) {
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(DeviceKvCache cache, make_cache(KvCacheForm::kInt8, 1, 1, 32, 64));
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto query, DeviceBuffer<float>::allocate(32, "query"));
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto output, DeviceBuffer<float>::allocate(32, "output"));
  const std::size_t workspace_bytes = attention_decode_workspace_bytes(1, 1, 32, 64, 16);
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto workspace, DeviceBuffer<float>::allocate(workspace_bytes / 4, "workspace"));
  AttentionDecodeArgs args;
  args.heads = 1;
  args.head_dim = 32;
  args.query = query.data();
  args.cache_form = KvCacheForm::kInt8;
  args.key_cache = cache.keys.data();
  args.value_cache = cache.values.data();
  args.cache_scales = cache.scales();
  args.cache_capacity = 64;
  args.output = output.data();
  args.workspace = workspace.data();
  args.workspace_bytes = workspace_bytes;
  args.keys_per_split = 16;
  const Status refused = attention_decode(args, nullptr);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("multiple of 32"), std::string::npos) << refused.error().to_string();
  args.keys_per_split = 32;
  args.cache_scales.key_residual = nullptr;
  EXPECT_FALSE(attention_decode(args, nullptr).ok()) << "an int8 cache without its residual";
}

}  // namespace
}  // namespace cubeforge::cuda::testing

namespace cubeforge::cuda::testing {
namespace {

// The accumulated probabilities differ only by the scores' summation order.
constexpr float kAccumulatedAttentionTolerance = 1e-5f;

// One layer under a KV budget on both sides: per batch row the CPU's
// LayerKvCache, and on the device the cache, its per-slot state, the fused
// decode attention with write_slots and kv_budget_update. Keys and values of
// the prefill come as given; those of each decode step from raw q|k|v through
// the attention's prologue (the CPU gets the same normalised, rotated key
// from qk_norm_rope_cache_write).
class BudgetLayer {
 public:
  BudgetLayer(KvCacheForm form, int batch, int heads, int head_dim, int fixed, int budget, int positions)
      : form_(form), B_(batch), H_(heads), D_(head_dim), fixed_(fixed), budget_(budget),
        C_(fixed + std::min(budget, positions)) {
    options_.format = form == KvCacheForm::kF32 ? KvFormat::kF32 : cpu_format(form);
    options_.budget = budget;
    for (int b = 0; b < B_; ++b) cpu_.emplace_back(options_, 0, fixed, positions, heads, head_dim);
  }
  int capacity() const { return C_; }

  // Caches the condition and shape positions 0..length−1 from rows [B, H, C, D]
  // (slot s at row s), then chooses the slot of position `length`.
  void prefill(const std::vector<float>& keys, const std::vector<float>& values, int length,
               const std::vector<float>& q_norm, const std::vector<float>& k_norm, float rope_theta) {
    rope_theta_ = rope_theta;
    const int slots = fixed_ + length;
    for (int b = 0; b < B_; ++b)
      for (int slot = 0; slot < slots; ++slot)
        cpu_[std::size_t(b)].append(slot < fixed_ ? -1 : slot - fixed_, slot_row(keys, b, slot, H_, C_, D_).data(),
                                    slot_row(values, b, slot, H_, C_, D_).data());
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(cache_, make_cache(form_, B_, H_, D_, C_));
    if (form_ == KvCacheForm::kF32) {
      std::vector<unsigned char> key_bytes(keys.size() * 4), value_bytes(values.size() * 4);
      std::memcpy(key_bytes.data(), keys.data(), key_bytes.size());
      std::memcpy(value_bytes.data(), values.data(), value_bytes.size());
      CUBEFORGE_ASSERT_OK(cache_.keys.upload(key_bytes));
      CUBEFORGE_ASSERT_OK(cache_.values.upload(value_bytes));
    } else {
      CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto source_keys, upload(keys, "source keys"));
      CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto source_values, upload(values, "source values"));
      KvCacheStoreArgs store = store_args(cache_, source_keys, source_values);
      store.count = slots;
      CUBEFORGE_ASSERT_OK(kv_cache_store(store, nullptr));
      CUBEFORGE_ASSERT_OK(synchronize_device());
    }
    std::vector<int> positions(std::size_t(B_) * C_, kKvSlotUnused);
    for (int b = 0; b < B_; ++b)
      for (int slot = 0; slot < slots; ++slot)
        positions[std::size_t(b) * C_ + slot] = slot < fixed_ ? -1 : slot - fixed_;
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(positions_, upload(positions, "slot positions"));
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(attention_, upload(std::vector<float>(positions.size(), 0.0f), "attention"));
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(write_slots_, DeviceBuffer<int>::allocate(std::size_t(B_), "write slots"));
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(scores_, DeviceBuffer<float>::allocate(std::size_t(B_) * H_ * C_, "scores"));
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(position_, DeviceBuffer<int>::allocate(1, "position"));
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(q_norm_, upload(q_norm, "q norm"));
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(k_norm_, upload(k_norm, "k norm"));
    const int W = H_ * D_;
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(exact_query_, DeviceBuffer<float>::allocate(std::size_t(B_) * W, "q"));
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(exact_keys_, DeviceBuffer<float>::allocate(std::size_t(B_) * W * kExactSlots, "k"));
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(exact_values_,
                                   DeviceBuffer<float>::allocate(std::size_t(B_) * W * kExactSlots, "v"));
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(output_, DeviceBuffer<float>::allocate(std::size_t(B_) * W, "output"));
    workspace_bytes_ = attention_decode_workspace_bytes(B_, H_, D_, C_, kKeysPerSplit);
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(workspace_, DeviceBuffer<float>::allocate(workspace_bytes_ / 4, "workspace"));
    CUBEFORGE_ASSERT_OK(attention_decode_reset_workspace(workspace_.data(), B_, H_, nullptr));
    ASSERT_NO_FATAL_FAILURE(choose_next(length - 1));
  }

  // kv_budget_update without scores: the device chooses the slot of
  // position + 1 and changes nothing else.
  void choose_next(int position) {
    CUBEFORGE_ASSERT_OK(position_.upload(std::vector<int>{position}));
    KvBudgetArgs args = budget_args();
    args.scores = nullptr;
    CUBEFORGE_ASSERT_OK(kv_budget_update(args, nullptr));
  }

  // Decodes `position` from raw q|k|v [B, 3W] on both sides and expects the
  // same output, slot positions and accumulated attention. Returns through
  // `evicted` the position the CPU's append replaced in each row (or −1).
  void decode(int position, const std::vector<float>& raw, std::vector<int>* evicted = nullptr) {
    const int W = H_ * D_, stride = 3 * W;
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto raw_device, upload(raw, "raw qkv"));
    CUBEFORGE_ASSERT_OK(position_.upload(std::vector<int>{position}));
    QkNormRopeArgs rope = exact_rope_args(B_, H_, D_, raw_device.data(), q_norm_.data(), k_norm_.data(),
                                          position_.data(), exact_query_.data(), exact_keys_.data(),
                                          exact_values_.data(), kExactSlots);
    rope.rope_theta = rope_theta_;
    CUBEFORGE_ASSERT_OK(qk_norm_rope_cache_write(rope, nullptr));
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto query, exact_query_.download());
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto key_layout, exact_keys_.download());
    std::vector<float> expected(std::size_t(B_) * W);
    if (evicted) evicted->assign(std::size_t(B_), -1);
    for (int b = 0; b < B_; ++b) {
      LayerKvCache& cpu = cpu_[std::size_t(b)];
      const std::vector<int> before = cpu.slot_positions();
      const int used = cpu.rows();
      cpu.append(position, slot_row(key_layout, b, position, H_, kExactSlots, D_).data(),
                 raw.data() + std::size_t(b) * stride + 2 * W);
      if (evicted && used == C_)
        for (int slot = 0; slot < C_; ++slot)
          if (cpu.slot_positions()[std::size_t(slot)] != before[std::size_t(slot)])
            (*evicted)[std::size_t(b)] = before[std::size_t(slot)];
      cpu.attend(query.data() + std::size_t(b) * W, expected.data() + std::size_t(b) * W);
    }

    AttentionDecodeArgs args;
    args.batch = B_;
    args.heads = H_;
    args.head_dim = D_;
    args.cache_form = form_;
    args.key_cache = cache_.keys.data();
    args.value_cache = cache_.values.data();
    args.cache_scales = cache_.scales();
    args.cache_capacity = C_;
    args.position = position_.data();
    args.length_offset = fixed_ + 1;
    args.raw_qkv = raw_device.data();
    args.raw_stride = stride;
    args.query_norm_weight = q_norm_.data();
    args.key_norm_weight = k_norm_.data();
    args.rope_theta = rope_theta_;
    args.write_position = position_.data();
    args.write_slots = write_slots_.data();
    args.scores = scores_.data();
    args.output = output_.data();
    args.workspace = workspace_.data();
    args.workspace_bytes = workspace_bytes_;
    args.keys_per_split = kKeysPerSplit;
    CUBEFORGE_ASSERT_OK(attention_decode(args, nullptr));
    CUBEFORGE_ASSERT_OK(kv_budget_update(budget_args(), nullptr));
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto actual, output_.download());
    EXPECT_LT(normalised_error(actual, expected), kStoredAttentionTolerance);

    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto positions, positions_.download());
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto attention, attention_.download());
    for (int b = 0; b < B_; ++b)
      for (int slot = 0; slot < C_; ++slot) {
        const std::size_t at = std::size_t(b) * C_ + slot;
        const int device = positions[at] == kKvSlotUnused ? -1 : positions[at];  // the CPU's −1 when never written
        EXPECT_EQ(device, cpu_[std::size_t(b)].slot_positions()[std::size_t(slot)])
            << "the position in row " << b << " slot " << slot;
        EXPECT_NEAR(attention[at], cpu_[std::size_t(b)].slot_attention()[std::size_t(slot)],
                    kAccumulatedAttentionTolerance)
            << "the attention accumulated in row " << b << " slot " << slot;
      }
  }

  const LayerKvCache& cpu(int b) const { return cpu_[std::size_t(b)]; }

 private:
  static constexpr int kExactSlots = 64;    // the decode positions' exact keys, slot = position
  static constexpr int kKeysPerSplit = 16;  // several splits write scores

  KvBudgetArgs budget_args() {
    KvBudgetArgs args;
    args.batch = B_;
    args.heads = H_;
    args.capacity = C_;
    args.fixed_slots = fixed_;
    args.budget = budget_;
    args.position = position_.data();
    args.scores = scores_.data();
    args.attention = attention_.data();
    args.slot_positions = positions_.data();
    args.write_slots = write_slots_.data();
    return args;
  }

  KvCacheForm form_;
  int B_, H_, D_, fixed_, budget_, C_;
  float rope_theta_ = 10000.0f;
  KvCacheOptions options_;
  std::vector<LayerKvCache> cpu_;
  DeviceKvCache cache_{};
  DeviceBuffer<int> positions_, write_slots_, position_;
  DeviceBuffer<float> attention_, scores_, q_norm_, k_norm_, exact_query_, exact_keys_, exact_values_, output_,
      workspace_;
  std::size_t workspace_bytes_ = 0;
};

// Random keys and queries: the least-attended position leaves, not always the
// oldest, in every form a budget takes; the device's accumulated attention,
// slots and outputs are the CPU's at every step.
TEST_F(KvCacheKernels, BudgetAccumulatesAndEvictsAsTheCpu) {
  constexpr int kBatch = 2, kHeads = 2, kFixed = 20, kBudget = 6, kPositions = 16, kPrefilled = 2;
  for (const KvCacheForm form : {KvCacheForm::kF32, KvCacheForm::kBF16, KvCacheForm::kFp8}) {
    SCOPED_TRACE(std::string(kv_cache_form_name(form)) + " cache");
    const int D = 16, W = kHeads * D;
    BudgetLayer layer(form, kBatch, kHeads, D, kFixed, kBudget, kPositions);
    const int C = layer.capacity();  // 26: two splits of 16
    ASSERT_NO_FATAL_FAILURE(layer.prefill(cache_rows(kBatch, kHeads, C, D, 71), cache_rows(kBatch, kHeads, C, D, 72),
                                          kPrefilled, random_floats(D, 73, 0.5f, 1.5f),
                                          random_floats(D, 74, 0.5f, 1.5f), 10000.0f));
    int least_not_oldest = 0;
    for (int position = kPrefilled; position < kPositions; ++position) {
      SCOPED_TRACE("position " + std::to_string(position));
      std::vector<int> before(kBatch);
      for (int b = 0; b < kBatch; ++b) {
        const auto& slots = layer.cpu(b).slot_positions();
        int oldest = std::numeric_limits<int>::max();
        for (int p : slots)
          if (p >= 1) oldest = std::min(oldest, p);
        before[std::size_t(b)] = oldest;
      }
      std::vector<int> evicted;
      ASSERT_NO_FATAL_FAILURE(
          layer.decode(position, random_floats(std::size_t(kBatch) * 3 * W, 80 + position, -2.0f, 2.0f), &evicted));
      for (int b = 0; b < kBatch; ++b)
        if (evicted[std::size_t(b)] >= 0 && evicted[std::size_t(b)] != before[std::size_t(b)]) ++least_not_oldest;
    }
    EXPECT_GT(least_not_oldest, 0) << "no step evicted by attention rather than age";
  }
}

// Equal accumulated attention and the fallback: keys opposite the query get
// probabilities of exactly 0, so those positions tie at zero, and the first
// slot in slot order leaves even when it holds a newer position than another
// candidate; choosing for an earlier position whose recent window covers
// every cached position (sequential decoding never does: budget − 1 ≥
// recent) makes the oldest leave.
TEST_F(KvCacheKernels, BudgetBreaksTiesBySlotAndFallsBackToTheOldest) {
  constexpr int kBatch = 1, kHeads = 2, D = 16, W = kHeads * D, kFixed = 1, kBudget = 5, kPositions = 16;
  constexpr float kNormWeight = 10.0f;  // scores of ±hundreds: exp underflows to exactly 0
  BudgetLayer layer(KvCacheForm::kF32, kBatch, kHeads, D, kFixed, kBudget, kPositions);
  const int C = layer.capacity();  // slot 0 the condition, 1 BOS, 2..5 the shape positions
  // A direction without the first rotary pair (rotated by one radian per
  // position); with a huge rope_theta the other pairs hardly turn.
  std::vector<float> direction = random_floats(std::size_t(D), 91, 0.5f, 1.5f);
  direction[0] = direction[1] = 0.0f;
  auto row_of = [&](float sign, float scale) {
    std::vector<float> row(static_cast<std::size_t>(W));
    for (int i = 0; i < W; ++i) row[std::size_t(i)] = sign * scale * direction[std::size_t(i % D)];
    return row;
  };
  // Prefill: the condition, BOS and position 1 along the query, 2..4 against it.
  std::vector<float> keys(std::size_t(kBatch) * kHeads * C * D, 0.0f);
  const auto values = cache_rows(kBatch, kHeads, C, D, 92);
  for (int slot = 0; slot < kFixed + 5; ++slot) {
    const auto row = row_of(slot <= kFixed + 1 ? 1.0f : -1.0f, 20.0f);
    for (int h = 0; h < kHeads; ++h)
      std::copy_n(row.begin() + h * D, D, keys.begin() + (std::ptrdiff_t(h) * C + slot) * D);
  }
  ASSERT_NO_FATAL_FAILURE(layer.prefill(keys, values, 5, std::vector<float>(D, kNormWeight),
                                        std::vector<float>(D, kNormWeight), 1e30f));
  // Each step: the query along the direction, the key against it.
  auto step_rows = [&](int seed) {
    std::vector<float> raw = row_of(1.0f, 1.0f);
    const auto key = row_of(-1.0f, 1.0f);
    raw.insert(raw.end(), key.begin(), key.end());
    const auto value = random_floats(std::size_t(W), seed);
    raw.insert(raw.end(), value.begin(), value.end());
    return raw;
  };
  auto slot_of = [&](int position) {
    const auto& slots = layer.cpu(0).slot_positions();
    return int(std::find(slots.begin(), slots.end(), position) - slots.begin());
  };
  // 5 takes position 1's slot (all candidates at zero), 6 position 2's;
  // then 7 and 8 take the slots of 5 and 6, ahead of the older position 3
  // with the same zero attention.
  const int expected_slots[] = {2, 3, 2, 3};
  for (int position = 5; position <= 8; ++position) {
    SCOPED_TRACE("position " + std::to_string(position));
    ASSERT_NO_FATAL_FAILURE(layer.decode(position, step_rows(100 + position)));
    EXPECT_EQ(slot_of(position), expected_slots[position - 5]);
    EXPECT_EQ(layer.cpu(0).slot_attention()[std::size_t(slot_of(position))], 0.0f);
  }
  // Cached: 7, 8, 3, 4. For position 4 the window (3 and 4 stay) covers them
  // all: the oldest, 3, leaves.
  ASSERT_NO_FATAL_FAILURE(layer.choose_next(3));
  const int slot_of_3 = slot_of(3);
  ASSERT_NO_FATAL_FAILURE(layer.decode(4, step_rows(200)));
  EXPECT_EQ(slot_of(3), C) << "position 3 left";
  EXPECT_EQ(layer.cpu(0).slot_positions()[std::size_t(slot_of_3)], 4);
}

// Low-rank keys and values (a KV rank): low_rank_kv_store compresses f32 rows
// with the bases as cpu::linear does and stores the latents as cpu::kv_store
// (a prefill's range, then decode slots read from device memory, across int8
// key blocks); every query head then attends over the one latent head, scaled
// by the model's head dim, against cpu::kv_attention over the CPU's store;
// project_heads against cpu::linear with each head's matrix.
TEST_F(KvCacheKernels, LowRankStoreAndSharedHeadAttentionEqualTheCpu) {
  constexpr int kBatch = 2, kHeads = 3, kHeadDim = 32, kCapacity = 40, kPrefill = 30, kOffset = 5;
  constexpr int W = kHeads * kHeadDim;
  const float scale = 1.0f / std::sqrt(float(kHeadDim));
  const auto keys = cache_rows(kBatch, kHeads, kCapacity, kHeadDim, 61);
  const auto values = cache_rows(kBatch, kHeads, kCapacity, kHeadDim, 62);
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto source_keys, upload(keys, "source keys"));
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto source_values, upload(values, "source values"));
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto position, DeviceBuffer<int>::allocate(1, "position"));
  for (const KvCacheForm form : {KvCacheForm::kF32, KvCacheForm::kBF16, KvCacheForm::kFp8, KvCacheForm::kInt8})
    for (const int rank : {16, 32, 48, 144}) {  // 144: more latents than the kernel's threads
      SCOPED_TRACE(std::string(kv_cache_form_name(form)) + " rank " + std::to_string(rank));
      const auto key_basis = random_floats(std::size_t(rank) * W, 63 + rank, -0.3f, 0.3f);
      const auto value_basis = random_floats(std::size_t(rank) * W, 64 + rank, -0.3f, 0.3f);
      const cpu::WeightMatrix key_matrix{DType::kF32, key_basis.data(), rank, W};
      const cpu::WeightMatrix value_matrix{DType::kF32, value_basis.data(), rank, W};
      CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto key_basis_device, upload(key_basis, "key basis"));
      CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto value_basis_device, upload(value_basis, "value basis"));
      CUBEFORGE_ASSERT_OK_AND_ASSIGN(DeviceKvCache cache, make_cache(form, kBatch, 1, rank, kCapacity));
      const KvFormat cpu_form = form == KvCacheForm::kF32 ? KvFormat::kF32 : cpu_format(form);
      std::vector<cpu::KvStore> stores;
      for (int b = 0; b < kBatch; ++b) stores.emplace_back(cpu_form, kCapacity, 1, rank);
      std::vector<float> latent_key(static_cast<std::size_t>(rank)), latent_value(static_cast<std::size_t>(rank));
      auto cpu_store = [&](int slot) {
        for (int b = 0; b < kBatch; ++b) {
          cpu::linear(slot_row(keys, b, slot, kHeads, kCapacity, kHeadDim).data(), 1, key_matrix, nullptr,
                      latent_key.data());
          cpu::linear(slot_row(values, b, slot, kHeads, kCapacity, kHeadDim).data(), 1, value_matrix, nullptr,
                      latent_value.data());
          cpu::kv_store(stores[std::size_t(b)], slot, latent_key.data(), latent_value.data());
        }
      };
      LowRankStoreArgs store;
      store.batch = kBatch;
      store.heads = kHeads;
      store.head_dim = kHeadDim;
      store.rank = rank;
      store.source_keys = source_keys.data();
      store.source_values = source_values.data();
      store.source_capacity = kCapacity;
      store.key_basis = key_basis_device.data();
      store.value_basis = value_basis_device.data();
      store.form = form;
      store.key_cache = cache.keys.data();
      store.value_cache = cache.values.data();
      store.scales = cache.scales();
      store.cache_capacity = kCapacity;
      store.first_slot = 0;
      store.count = kPrefill;
      CUBEFORGE_ASSERT_OK(low_rank_kv_store(store, nullptr));
      for (int slot = 0; slot < kPrefill; ++slot) cpu_store(slot);

      CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto output,
                                     DeviceBuffer<float>::allocate(std::size_t(kBatch) * kHeads * rank, "output"));
      const std::size_t workspace_bytes = attention_decode_workspace_bytes(kBatch, kHeads, rank, kCapacity);
      CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto workspace,
                                     DeviceBuffer<float>::allocate(workspace_bytes / sizeof(float) + 1, "workspace"));
      CUBEFORGE_ASSERT_OK(attention_decode_reset_workspace(workspace.data(), kBatch, kHeads, nullptr));
      for (int slot = kPrefill; slot < kCapacity; ++slot) {
        SCOPED_TRACE("decode slot " + std::to_string(slot));
        // The decode step: its slot from device memory, then every head over the latent head.
        CUBEFORGE_ASSERT_OK(position.upload(std::vector<int>{slot - kOffset}));
        LowRankStoreArgs step = store;
        step.position = position.data();
        step.slot_offset = kOffset;
        CUBEFORGE_ASSERT_OK(low_rank_kv_store(step, nullptr));
        cpu_store(slot);
        const auto query = random_floats(std::size_t(kBatch) * kHeads * rank, 65 + slot, -1.5f, 1.5f);
        std::vector<float> expected(query.size());
        for (int b = 0; b < kBatch; ++b)
          cpu::kv_attention(stores[std::size_t(b)], query.data() + std::size_t(b) * kHeads * rank, kHeads, scale,
                            slot + 1, expected.data() + std::size_t(b) * kHeads * rank, nullptr);
        CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto query_device, upload(query, "query"));
        AttentionDecodeArgs attention;
        attention.batch = kBatch;
        attention.heads = kHeads;
        attention.head_dim = rank;
        attention.query = query_device.data();
        attention.shared_kv_head = true;
        attention.scale = scale;
        attention.cache_form = form;
        attention.key_cache = cache.keys.data();
        attention.value_cache = cache.values.data();
        attention.cache_scales = cache.scales();
        attention.cache_capacity = kCapacity;
        attention.position = position.data();
        attention.length_offset = kOffset + 1;
        attention.output = output.data();
        attention.workspace = workspace.data();
        attention.workspace_bytes = workspace.bytes();
        CUBEFORGE_ASSERT_OK(attention_decode(attention, nullptr));
        CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto actual, output.download());
        EXPECT_LT(normalised_error(actual, expected), kStoredAttentionTolerance);
      }
    }

  // project_heads: queries [B, H·D] into latents [B, H·R] with [H, R, D], and back with [H, D, R].
  for (const auto& [rows, cols] : {std::pair{16, kHeadDim}, std::pair{kHeadDim, 16}}) {
    const auto weights = random_floats(std::size_t(kHeads) * rows * cols, 66 + rows, -0.5f, 0.5f);
    const auto input = random_floats(std::size_t(kBatch) * kHeads * cols, 67 + rows);
    std::vector<float> expected(std::size_t(kBatch) * kHeads * rows);
    for (int b = 0; b < kBatch; ++b)
      for (int h = 0; h < kHeads; ++h)
        cpu::linear(input.data() + (std::size_t(b) * kHeads + h) * cols, 1,
                    cpu::WeightMatrix{DType::kF32, weights.data() + std::size_t(h) * rows * cols, rows, cols}, nullptr,
                    expected.data() + (std::size_t(b) * kHeads + h) * rows);
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto weights_device, upload(weights, "weights"));
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto input_device, upload(input, "input"));
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto output, DeviceBuffer<float>::allocate(expected.size(), "output"));
    ProjectHeadsArgs project;
    project.batch = kBatch;
    project.heads = kHeads;
    project.rows = rows;
    project.cols = cols;
    project.weights = weights_device.data();
    project.input = input_device.data();
    project.output = output.data();
    CUBEFORGE_ASSERT_OK(project_heads(project, nullptr));
    CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto actual, output.download());
    EXPECT_LT(normalised_error(actual, expected), 1e-6);
  }
}

}  // namespace
}  // namespace cubeforge::cuda::testing
