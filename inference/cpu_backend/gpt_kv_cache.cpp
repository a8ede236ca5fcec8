// The GPT's KV cache: stored forms, heavy-hitter eviction and low-rank keys
// and values (see gpt_kv_cache.h).
#include "inference/cpu_backend/gpt_kv_cache.h"

#include <algorithm>
#include <cmath>
#include <cstring>


namespace cubeforge {

LayerKvCache::LayerKvCache(const KvCacheOptions& options, size_t layer, int fixed_slots, int positions, int heads,
                           int head_dim)
    : options_(&options), fixed_slots_(fixed_slots), heads_(heads), head_dim_(head_dim) {
  const int kept = options.budget > 0 ? std::min(options.budget, positions) : positions;
  const int capacity = fixed_slots + kept;
  const int rank = options.low_rank ? options.low_rank->rank() : 0;
  if (options.low_rank) {
    low_rank_ = &options.low_rank->layer(layer);
    latent_key_.resize(size_t(rank));
    latent_value_.resize(size_t(rank));
    latent_query_.resize(size_t(heads * rank));
    latent_out_.resize(size_t(heads * rank));
  }
  store_ = cpu::KvStore(options.format, capacity, rank ? 1 : heads, rank ? rank : head_dim);
  position_.assign(size_t(capacity), -1);
  attention_.assign(size_t(capacity), 0.f);
}

void LayerKvCache::truncate(int positions) {
  CUBEFORGE_CHECK(options_->exact(), "only the exact KV cache forgets positions");
  used_ = std::min(used_, fixed_slots_ + positions);
}

void LayerKvCache::clear() {
  used_ = 0;
  store_.clear();
  std::fill(attention_.begin(), attention_.end(), 0.f);
}

int LayerKvCache::choose_slot(int position) {
  if (used_ < store_.capacity) return used_++;
  CUBEFORGE_CHECK(options_->budget > 0 && position >= 0, "a KV cache without a budget is full");
  // Heavy hitters: of the positions older than the recent window (never BOS
  // or a condition token), the one with the least attention leaves; when
  // the window covers them all, the oldest.
  const int recent = std::max(1, options_->budget / 2);
  int victim = -1, oldest = -1;
  for (int slot = 0; slot < store_.capacity; ++slot) {
    const int p = position_[size_t(slot)];
    if (p < 1) continue;
    if (oldest < 0 || p < position_[size_t(oldest)]) oldest = slot;
    if (p > position - recent) continue;
    if (victim < 0 || attention_[size_t(slot)] < attention_[size_t(victim)]) victim = slot;
  }
  return victim >= 0 ? victim : oldest;
}

void LayerKvCache::append(int position, const float* key, const float* value) {
  int slot = 0;
  if (options_->exact() && position >= 0) {
    slot = fixed_slots_ + position;
    CUBEFORGE_CHECK(slot <= used_ && slot < store_.capacity, "a shape position past the cached ones");
    used_ = std::max(used_, slot + 1);
  } else {
    slot = choose_slot(position);
  }
  position_[size_t(slot)] = position;
  attention_[size_t(slot)] = 0.f;
  if (low_rank_) {
    cpu::linear(key, 1, low_rank_->keys, nullptr, latent_key_.data());
    cpu::linear(value, 1, low_rank_->values, nullptr, latent_value_.data());
    cpu::kv_store(store_, slot, latent_key_.data(), latent_value_.data());
  } else {
    cpu::kv_store(store_, slot, key, value);
  }
}

void LayerKvCache::attend(const float* query, float* out, int rows) {
  const int64_t width = int64_t(heads_) * head_dim_;
  const float scale = 1.0f / std::sqrt(float(head_dim_));
  if (options_->exact()) {
    // The float32 cache is the plain [rows, width] layout cpu::attention reads.
    const int seen = rows < 0 ? used_ : std::min(rows, used_);
    cpu::attention(query, 1, width, reinterpret_cast<const float*>(store_.keys.data()),
                   reinterpret_cast<const float*>(store_.values.data()), seen, width, heads_, head_dim_, -1, out,
                   width);
    return;
  }
  float* weights = options_->budget > 0 ? attention_.data() : nullptr;
  if (!low_rank_) {
    cpu::kv_attention(store_, query, heads_, scale, used_, out, weights);
    return;
  }
  const int64_t rank = store_.head_dim;
  for (int h = 0; h < heads_; ++h)
    cpu::linear(query + h * head_dim_, 1, low_rank_->key_heads[size_t(h)], nullptr, latent_query_.data() + h * rank);
  cpu::kv_attention(store_, latent_query_.data(), heads_, scale, used_, latent_out_.data(), weights);
  for (int h = 0; h < heads_; ++h)
    cpu::linear(latent_out_.data() + h * rank, 1, low_rank_->value_heads[size_t(h)], nullptr, out + h * head_dim_);
}

void LayerKvCache::read(std::vector<float>* keys, std::vector<float>* values) const {
  const int64_t width = int64_t(heads_) * head_dim_, stored = store_.width();
  keys->assign(size_t(used_ * width), 0.f);
  values->assign(size_t(used_ * width), 0.f);
  std::vector<float> key(static_cast<size_t>(stored)), value(static_cast<size_t>(stored));
  for (int slot = 0; slot < used_; ++slot) {
    cpu::kv_load(store_, slot, key.data(), value.data());
    float* k = keys->data() + slot * width;
    float* v = values->data() + slot * width;
    if (!low_rank_) {
      std::copy(key.begin(), key.end(), k);
      std::copy(value.begin(), value.end(), v);
      continue;
    }
    // Back to full width: Σ_i latent_i · basis row i.
    const auto* key_basis = static_cast<const float*>(low_rank_->keys.data);
    const auto* value_basis = static_cast<const float*>(low_rank_->values.data);
    for (int64_t i = 0; i < stored; ++i)
      for (int64_t c = 0; c < width; ++c) {
        k[c] += key[size_t(i)] * key_basis[i * width + c];
        v[c] += value[size_t(i)] * value_basis[i * width + c];
      }
  }
}

double LayerKvCache::bytes_read() const {
  double bytes = store_.bytes_for(used_);
  if (low_rank_) bytes += double(low_rank_->keys.byte_size() + low_rank_->values.byte_size()) * 2;
  return bytes;
}

void LayerKvCache::first_value(float* out) const {
  if (!low_rank_) {
    cpu::kv_load(store_, 0, nullptr, out);
    return;
  }
  std::vector<float> keys, values;
  read(&keys, &values);
  std::copy(values.begin(), values.begin() + int64_t(heads_) * head_dim_, out);
}

}  // namespace cubeforge
