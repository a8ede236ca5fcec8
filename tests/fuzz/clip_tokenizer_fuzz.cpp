// libFuzzer target: the CLIP tokenizer and its Unicode helpers must take any
// bytes without crashing (ASan/UBSan watch memory and arithmetic), and their
// outputs must keep their invariants:
//   - decoded UTF-8 re-encodes to valid UTF-8 that decodes to the same text;
//   - NFC is idempotent;
//   - token ids are in range, 77 long, BOS first, EOS closing the real tokens,
//     and the mask is ones then zeros.
// The vocabulary is a small synthetic one (every byte symbol, a few merges,
// the two specials), so the target needs no files.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "inference/text/clip_tokenizer.h"
#include "inference/text/unicode.h"

namespace {

using namespace cubeforge;

std::string json_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

const ClipTokenizer& synthetic_tokenizer() {
  static const ClipTokenizer tokenizer = [] {
    // Byte symbols as GPT-2 maps them: printable Latin-1 bytes stand for
    // themselves, the rest for U+0100 onwards.
    std::string symbols[256];
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      unicode::append_utf8(printable ? char32_t(b) : char32_t(256 + extra++), symbols[b]);
    }
    std::string vocab = "{";
    int next_id = 0;
    auto add = [&](const std::string& token) {
      vocab += (next_id == 0 ? "\"" : ",\"") + json_escape(token) + "\":" + std::to_string(next_id);
      ++next_id;
    };
    for (const std::string& s : symbols) add(s);
    for (const std::string& s : symbols) add(s + "</w>");
    std::string merges = "#version: 0.2\n";
    for (char x : std::string("abcde")) {
      for (char y : std::string("abcde")) {
        merges += std::string(1, x) + " " + std::string(1, y) + "\n";
        add(std::string(1, x) + y);
        merges += std::string(1, x) + " " + std::string(1, y) + "</w>\n";
        add(std::string(1, x) + y + "</w>");
      }
    }
    merges += "ab c</w>\n";
    add("abc</w>");
    merges += "Ã ©</w>\n";  // "é" at the end of a word
    add("Ã©</w>");
    add("<|startoftext|>");
    add("<|endoftext|>");
    vocab += "}";
    auto loaded = ClipTokenizer::from_strings(vocab, merges);
    if (!loaded.ok()) {
      std::fprintf(stderr, "synthetic vocabulary rejected: %s\n", loaded.error().to_string().c_str());
      std::abort();
    }
    return std::move(loaded).value();
  }();
  return tokenizer;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);

  const std::u32string decoded = unicode::decode_utf8(bytes);
  const std::string reencoded = unicode::encode_utf8(decoded);
  if (unicode::decode_utf8(reencoded) != decoded) std::abort();
  const std::u32string composed = unicode::to_nfc(decoded);
  if (unicode::to_nfc(composed) != composed) std::abort();

  const ClipTokenizer& tokenizer = synthetic_tokenizer();
  const TokenizedText tokens = tokenizer.encode(bytes);
  if (tokens.input_ids.size() != size_t(kClipContextLength) || tokens.attention_mask.size() != tokens.input_ids.size())
    std::abort();
  if (tokens.input_ids[0] != tokenizer.start_of_text_id()) std::abort();
  const size_t real = std::min(tokens.bpe_ids.size(), size_t(kClipContextLength - 2)) + 2;
  if (tokens.input_ids[real - 1] != tokenizer.end_of_text_id()) std::abort();
  for (size_t i = 0; i < tokens.input_ids.size(); ++i) {
    if (tokens.input_ids[i] < 0 || tokens.input_ids[i] >= tokenizer.vocab_size()) std::abort();
    if (tokens.attention_mask[i] != (i < real ? 1 : 0)) std::abort();
  }
  return 0;
}
