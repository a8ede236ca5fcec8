// CLIP BPE tokenizer: vocabulary and merge loading, pre-tokenisation and BPE.
#include "inference/text/clip_tokenizer.h"

#include <array>
#include <climits>
#include <mutex>
#include <queue>
#include <nlohmann/json.hpp>
#include <utility>

#include "inference/core/file_io.h"
#include "inference/core/strict_json.h"
#include "inference/text/unicode.h"

namespace cubeforge {
namespace {

constexpr std::string_view kStartOfText = "<|startoftext|>";
constexpr std::string_view kEndOfText = "<|endoftext|>";
constexpr std::u32string_view kStartOfText32 = U"<|startoftext|>";
constexpr std::u32string_view kEndOfText32 = U"<|endoftext|>";
constexpr std::string_view kEndOfWord = "</w>";
// Hugging Face's CLIPTokenizer reads only the first 49152 - 256 - 2 merges of
// merges.txt (the vocabulary holds 256 bytes, 256 end-of-word bytes, the
// merges and two specials); its fast tokenizer is converted from that list.
constexpr size_t kMaxMerges = 49152 - 256 - 2;
// Words cached at most; the cache is cleared when full (prompts are short,
// so this only bounds memory against adversarial input).
constexpr size_t kMaxCachedWords = 1 << 16;
constexpr size_t kMaxCachedWordBytes = 256;

// GPT-2's reversible byte -> printable character map: printable Latin-1 bytes
// map to themselves, the other 68 bytes to U+0100.. in byte order.
std::array<std::string, 256> make_byte_symbols() {
  std::array<std::string, 256> symbols;
  auto printable = [](int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); };
  int next_extra = 0;
  for (int b = 0; b < 256; ++b) {
    const char32_t code_point = printable(b) ? char32_t(b) : char32_t(256 + next_extra++);
    unicode::append_utf8(code_point, symbols[size_t(b)]);
  }
  return symbols;
}

std::string merge_key(std::string_view left, std::string_view right) {
  std::string key;
  key.reserve(left.size() + right.size() + 1);
  key.append(left);
  key.push_back(' ');
  key.append(right);
  return key;
}

// Splits normalised text into pre-tokens following
// 's|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+ ; the alternatives
// are tried in this order at each position, as a backtracking regex does.
std::vector<std::u32string_view> split_pre_tokens(std::u32string_view text) {
  std::vector<std::u32string_view> pieces;
  size_t i = 0;
  const size_t n = text.size();
  auto is_other = [](char32_t c) { return !unicode::is_whitespace(c) && !unicode::is_letter(c) && !unicode::is_number(c); };
  while (i < n) {
    const char32_t c = text[i];
    if (unicode::is_whitespace(c)) {
      ++i;
      continue;
    }
    if (c == U'\'' && i + 1 < n) {
      static constexpr std::u32string_view kContractions[] = {U"s", U"t", U"re", U"ve", U"m", U"ll", U"d"};
      size_t matched = 0;
      for (std::u32string_view suffix : kContractions) {
        if (text.substr(i + 1, suffix.size()) == suffix) {
          matched = 1 + suffix.size();
          break;
        }
      }
      if (matched != 0) {
        pieces.push_back(text.substr(i, matched));
        i += matched;
        continue;
      }
    }
    size_t end = i + 1;
    if (unicode::is_letter(c)) {
      while (end < n && unicode::is_letter(text[end])) ++end;
    } else if (!unicode::is_number(c)) {
      while (end < n && is_other(text[end])) ++end;
    }
    pieces.push_back(text.substr(i, end - i));
    i = end;
  }
  return pieces;
}

}  // namespace

struct ClipTokenizer::Tables {
  std::unordered_map<std::string, int32_t> vocab;
  std::vector<std::string> id_to_token;
  std::unordered_map<std::string, int32_t> merge_ranks;  // "left right" -> rank
  std::array<std::string, 256> byte_symbols = make_byte_symbols();

  mutable std::mutex cache_mutex;
  mutable std::unordered_map<std::string, std::vector<int32_t>> word_cache;
};

ClipTokenizer::ClipTokenizer() : tables_(std::make_unique<Tables>()) {}
ClipTokenizer::ClipTokenizer(ClipTokenizer&&) noexcept = default;
ClipTokenizer& ClipTokenizer::operator=(ClipTokenizer&&) noexcept = default;
ClipTokenizer::~ClipTokenizer() = default;

Result<ClipTokenizer> ClipTokenizer::load(const std::filesystem::path& clip_dir) {
  const std::filesystem::path vocab_path = clip_dir / "vocab.json";
  const std::filesystem::path merges_path = clip_dir / "merges.txt";
  CUBEFORGE_ASSIGN_OR_RETURN(std::string vocab_text, read_file_text(vocab_path, uint64_t(64) << 20));
  CUBEFORGE_ASSIGN_OR_RETURN(std::string merges_text, read_file_text(merges_path, uint64_t(64) << 20));
  return from_strings(vocab_text, merges_text, vocab_path.string(), merges_path.string());
}

Result<ClipTokenizer> ClipTokenizer::from_strings(std::string_view vocab_json, std::string_view merges_text,
                                                  std::string_view vocab_name, std::string_view merges_name) {
  ClipTokenizer tokenizer;
  Tables& tables = *tokenizer.tables_;

  // Strict and depth-bounded: a token given twice is an error, and an id
  // nested without end never reaches the recursive dump() of a message.
  auto parsed = parse_json_strictly(vocab_json);
  if (!parsed.ok())
    return make_error(ErrorCode::kCorruptFile, std::string(vocab_name) + ": " + parsed.error().message +
                                                   "; expected the vocab.json of a Hugging Face CLIP tokenizer");
  const nlohmann::json& vocab = *parsed;
  if (!vocab.is_object()) {
    return make_error(ErrorCode::kCorruptFile,
                      std::string(vocab_name) + ": not a JSON object of token -> id; expected the vocab.json of a "
                      "Hugging Face CLIP tokenizer");
  }
  int64_t largest_id = -1;
  for (const auto& [token, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= (int64_t(1) << 24)) {
      return make_error(ErrorCode::kCorruptFile,
                        std::string(vocab_name) + ": token \"" + token + "\" has id " + json_excerpt(id) +
                            "; ids must be integers in [0, 2^24)");
    }
    largest_id = std::max(largest_id, id.get<int64_t>());
    tables.vocab.emplace(token, int32_t(id.get<int64_t>()));
  }
  tables.id_to_token.resize(size_t(largest_id + 1));
  for (const auto& [token, id] : tables.vocab) tables.id_to_token[size_t(id)] = token;
  tokenizer.vocab_size_ = int32_t(largest_id + 1);

  auto require_token = [&](const std::string& token) -> Result<int32_t> {
    auto it = tables.vocab.find(token);
    if (it == tables.vocab.end()) {
      return make_error(ErrorCode::kCorruptFile,
                        std::string(vocab_name) + ": token \"" + token +
                            "\" is missing; a CLIP vocabulary holds every byte symbol (alone and with </w>) "
                            "and <|startoftext|>, <|endoftext|>");
    }
    return it->second;
  };
  CUBEFORGE_ASSIGN_OR_RETURN(tokenizer.start_of_text_id_, require_token(std::string(kStartOfText)));
  CUBEFORGE_ASSIGN_OR_RETURN(tokenizer.end_of_text_id_, require_token(std::string(kEndOfText)));
  // Every byte must resolve alone, so BPE can never produce an unknown symbol.
  for (const std::string& symbol : tables.byte_symbols) {
    CUBEFORGE_TRY(require_token(symbol));
    CUBEFORGE_TRY(require_token(symbol + std::string(kEndOfWord)));
  }

  size_t line_start = 0;
  size_t line_number = 0;
  while (line_start < merges_text.size() && tables.merge_ranks.size() < kMaxMerges) {
    size_t line_end = merges_text.find('\n', line_start);
    if (line_end == std::string_view::npos) line_end = merges_text.size();
    std::string_view line = merges_text.substr(line_start, line_end - line_start);
    line_start = line_end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line_number == 1 && line.starts_with("#version")) continue;
    if (line.empty()) continue;
    const size_t space = line.find(' ');
    if (space == std::string_view::npos || space == 0 || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string_view::npos) {
      return make_error(ErrorCode::kCorruptFile,
                        std::string(merges_name) + ": line " + std::to_string(line_number) +
                            " is not two symbols separated by one space: \"" + std::string(line) + "\"");
    }
    const std::string_view left = line.substr(0, space);
    const std::string_view right = line.substr(space + 1);
    const std::string merged = std::string(left) + std::string(right);
    if (!tables.vocab.contains(merged)) {
      return make_error(ErrorCode::kCorruptFile,
                        std::string(merges_name) + ": line " + std::to_string(line_number) + " merges into \"" +
                            merged + "\", which " + std::string(vocab_name) +
                            " lacks; are both files from the same tokenizer?");
    }
    // A repeated merge keeps its first (lowest) rank.
    tables.merge_ranks.emplace(merge_key(left, right), int32_t(tables.merge_ranks.size()));
  }
  if (tables.merge_ranks.empty()) {
    return make_error(ErrorCode::kCorruptFile, std::string(merges_name) + ": holds no merges");
  }
  return tokenizer;
}

std::string ClipTokenizer::token_string(int32_t id) const {
  if (id < 0 || size_t(id) >= tables_->id_to_token.size()) return {};
  return tables_->id_to_token[size_t(id)];
}

void ClipTokenizer::append_word_ids(const std::string& byte_level_word, std::vector<int32_t>& out) const {
  Tables& tables = *tables_;
  {
    std::lock_guard<std::mutex> lock(tables.cache_mutex);
    auto it = tables.word_cache.find(byte_level_word);
    if (it != tables.word_cache.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }

  // Symbols are byte ranges of `word`; each starts as one character (every
  // byte symbol is one UTF-8 character) and the last one carries "</w>".
  const std::string word = byte_level_word + std::string(kEndOfWord);
  struct Symbol {
    int32_t start, length;
    int32_t previous, next;  // neighbours still alive, -1 at the ends
  };
  std::vector<Symbol> symbols;
  for (size_t i = 0; i < byte_level_word.size();) {
    const unsigned char lead = static_cast<unsigned char>(byte_level_word[i]);
    const size_t length = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    const int32_t index = int32_t(symbols.size());
    symbols.push_back({int32_t(i), int32_t(length), index - 1, index + 1});
    i += length;
  }
  if (symbols.empty()) return;
  symbols.back().length += int32_t(kEndOfWord.size());
  symbols.back().next = -1;
  auto text_of = [&](const Symbol& symbol) {
    return std::string_view(word).substr(size_t(symbol.start), size_t(symbol.length));
  };

  // Merge the known pair of lowest rank first, leftmost first among equal
  // ranks, one merge at a time, re-queuing the pairs each merge creates: the
  // order of the Rust BPE behind CLIPTokenizerFast (O(n log n) for long
  // words). The Python CLIPTokenizer instead merges every occurrence of the
  // best pair in one sweep, which can differ when a merge creates a pair of
  // lower rank next to another occurrence; the fast tokenizer is the one
  // Cube 3D runs.
  struct Candidate {
    int32_t rank;
    int32_t left;            // index of the left symbol
    // Length of left + right when queued. Symbols only grow by absorbing a
    // neighbour, so an equal length means the pair is unchanged.
    int32_t merged_length;
    bool operator>(const Candidate& other) const {
      return rank != other.rank ? rank > other.rank : left > other.left;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  auto push_pair = [&](int32_t left) {
    if (left < 0 || symbols[size_t(left)].next < 0) return;
    const Symbol& a = symbols[size_t(left)];
    const Symbol& b = symbols[size_t(a.next)];
    auto it = tables.merge_ranks.find(merge_key(text_of(a), text_of(b)));
    if (it != tables.merge_ranks.end()) queue.push({it->second, left, a.length + b.length});
  };
  for (int32_t i = 0; i + 1 < int32_t(symbols.size()); ++i) push_pair(i);
  while (!queue.empty()) {
    const Candidate candidate = queue.top();
    queue.pop();
    Symbol& left = symbols[size_t(candidate.left)];
    if (left.length == 0 || left.next < 0) continue;  // merged away, or now last
    Symbol& right = symbols[size_t(left.next)];
    if (left.length + right.length != candidate.merged_length) continue;  // a neighbour changed since
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (left.next >= 0) symbols[size_t(left.next)].previous = candidate.left;
    push_pair(left.previous);
    push_pair(candidate.left);
  }

  std::vector<int32_t> ids;
  for (int32_t i = 0; i >= 0; i = symbols[size_t(i)].next) {
    // Loading checked that every byte symbol and every merge result exists.
    auto it = tables.vocab.find(std::string(text_of(symbols[size_t(i)])));
    CUBEFORGE_CHECK(it != tables.vocab.end(), "BPE produced a symbol outside the vocabulary");
    ids.push_back(it->second);
  }
  out.insert(out.end(), ids.begin(), ids.end());

  if (byte_level_word.size() > kMaxCachedWordBytes) return;
  std::lock_guard<std::mutex> lock(tables.cache_mutex);
  if (tables.word_cache.size() >= kMaxCachedWords) tables.word_cache.clear();
  tables.word_cache.emplace(byte_level_word, std::move(ids));
}

std::vector<int32_t> ClipTokenizer::bpe_ids(std::string_view text) const {
  // Normalise the whole text first: the fast tokenizer's special tokens are
  // "normalized" added tokens, so they are found in the normalised text (an
  // upper-case "<|ENDOFTEXT|>" is one too). Whitespace runs would collapse to
  // one space here, but the pattern drops whitespace anyway, so only NFC and
  // lower-casing change the pieces.
  const std::u32string composed = unicode::to_nfc(unicode::decode_utf8(text));
  std::u32string normalized;
  normalized.reserve(composed.size());
  for (char32_t code_point : composed) unicode::append_lowercase(code_point, normalized);
  const std::u32string_view all(normalized);

  std::vector<int32_t> ids;
  std::string utf8_piece;
  std::string byte_level_word;
  size_t position = 0;
  while (true) {
    size_t special_at = std::u32string_view::npos;
    std::u32string_view special;
    for (std::u32string_view candidate : {kStartOfText32, kEndOfText32}) {
      const size_t found = all.find(candidate, position);
      if (found < special_at) {
        special_at = found;
        special = candidate;
      }
    }
    const std::u32string_view chunk = all.substr(
        position, special_at == std::u32string_view::npos ? std::u32string_view::npos : special_at - position);
    for (std::u32string_view piece : split_pre_tokens(chunk)) {
      utf8_piece = unicode::encode_utf8(piece);
      byte_level_word.clear();
      for (unsigned char byte : utf8_piece) byte_level_word += tables_->byte_symbols[byte];
      append_word_ids(byte_level_word, ids);
    }
    if (special_at == std::u32string_view::npos) break;
    ids.push_back(special == kStartOfText32 ? start_of_text_id_ : end_of_text_id_);
    position = special_at + special.size();
  }
  return ids;
}

TokenizedText ClipTokenizer::encode(std::string_view text) const {
  TokenizedText result;
  result.bpe_ids = bpe_ids(text);
  const size_t content_capacity = kClipContextLength - 2;
  const size_t kept = std::min(result.bpe_ids.size(), content_capacity);
  result.truncated = result.bpe_ids.size() > content_capacity;
  result.input_ids.reserve(kClipContextLength);
  result.input_ids.push_back(start_of_text_id_);
  result.input_ids.insert(result.input_ids.end(), result.bpe_ids.begin(), result.bpe_ids.begin() + std::ptrdiff_t(kept));
  result.input_ids.push_back(end_of_text_id_);
  result.attention_mask.assign(result.input_ids.size(), 1);
  result.input_ids.resize(kClipContextLength, end_of_text_id_);
  result.attention_mask.resize(kClipContextLength, 0);
  return result;
}

}  // namespace cubeforge
