// libFuzzer target: loading vocab.json and merges.txt. The input holds both,
// split at the first "\n===\n" (without one, it is the vocabulary and the
// merges are empty). Loading must give a tokenizer or an error; an accepted
// tokenizer must encode a few prompts into ids inside its vocabulary.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "inference/text/clip_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t split = input.find("\n===\n");
  const std::string_view vocab = input.substr(0, split);
  const std::string_view merges = split == std::string_view::npos ? std::string_view() : input.substr(split + 5);
  auto tokenizer = cubeforge::ClipTokenizer::from_strings(vocab, merges, "fuzz/vocab.json", "fuzz/merges.txt");
  if (!tokenizer.ok()) {
    (void)tokenizer.error().to_string();  // messages quote the input: escaping must cope with any bytes
    return 0;
  }
  for (std::string_view prompt : {"a tall chair", "abc abcde \xc3\xa9!", "<|endoftext|> x", ""}) {
    const cubeforge::TokenizedText tokens = tokenizer->encode(prompt);
    for (int64_t id : tokens.input_ids)
      if (id < 0 || id >= tokenizer->vocab_size()) std::abort();
  }
  return 0;
}
