// The CLIP byte-level BPE tokenizer, reading a Hugging Face CLIP folder
// (`vocab.json`, `merges.txt`).
//
// It reproduces Hugging Face's CLIPTokenizerFast as Cube 3D calls it
// (padding="max_length", truncation=True, max_length=77):
//   1. the text is normalised: invalid UTF-8 -> U+FFFD, NFC, runs of
//      whitespace -> one space, lower case (per character, so a final capital
//      sigma becomes σ, as the Rust normaliser does);
//   2. "<|startoftext|>" / "<|endoftext|>" in the normalised text are the
//      special ids (they are "normalized" added tokens in Hugging Face's files);
//   3. the text between them is pre-tokenised with 's|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+
//      (whitespace between matches is dropped);
//   4. each piece's UTF-8 bytes are mapped to printable characters
//      (GPT-2's bytes_to_unicode) and merged by BPE with "</w>" marking the end
//      of the word, lowest merge rank first (then leftmost), one merge at a
//      time as the Rust tokenizers library does; words are cached;
//   5. ids = <|startoftext|> + the first 75 BPE ids + <|endoftext|>, padded
//      with <|endoftext|> to 77; the attention mask is 1 on the real tokens.
// Character classes come from generated Unicode tables (see unicode.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "inference/core/result.h"

namespace cubeforge {

// CLIP's context: BOS + 75 tokens + EOS.
inline constexpr int kClipContextLength = 77;

struct TokenizedText {
  std::vector<int32_t> bpe_ids;         // every BPE id of the text, before truncation
  std::vector<int32_t> input_ids;       // [kClipContextLength]
  std::vector<int32_t> attention_mask;  // [kClipContextLength], 1 = real token, 0 = padding
  bool truncated = false;               // the text had more than 75 BPE ids
};

class ClipTokenizer {
 public:
  // Reads `clip_dir`/vocab.json and `clip_dir`/merges.txt.
  static Result<ClipTokenizer> load(const std::filesystem::path& clip_dir);
  // Same, from the files' contents (tests); the names only appear in errors.
  static Result<ClipTokenizer> from_strings(std::string_view vocab_json, std::string_view merges_text,
                                            std::string_view vocab_name = "vocab.json",
                                            std::string_view merges_name = "merges.txt");

  ClipTokenizer(ClipTokenizer&&) noexcept;
  ClipTokenizer& operator=(ClipTokenizer&&) noexcept;
  ~ClipTokenizer();

  // Any bytes are accepted; invalid UTF-8 is replaced, never an error.
  TokenizedText encode(std::string_view text) const;
  // The raw BPE ids of the text, without BOS/EOS, truncation or padding.
  std::vector<int32_t> bpe_ids(std::string_view text) const;

  int32_t start_of_text_id() const { return start_of_text_id_; }
  int32_t end_of_text_id() const { return end_of_text_id_; }
  int32_t vocab_size() const { return vocab_size_; }  // largest id + 1
  // The token string of an id (byte-level characters, "</w>" kept); empty if unknown.
  std::string token_string(int32_t id) const;

 private:
  ClipTokenizer();
  struct Tables;
  void append_word_ids(const std::string& byte_level_word, std::vector<int32_t>& out) const;

  std::unique_ptr<Tables> tables_;
  int32_t start_of_text_id_ = -1;
  int32_t end_of_text_id_ = -1;
  int32_t vocab_size_ = 0;
};

}  // namespace cubeforge
