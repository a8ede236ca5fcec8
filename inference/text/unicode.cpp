// Lookups into the generated Unicode tables, UTF-8 coding and NFC.
#include "inference/text/unicode.h"

#include <algorithm>
#include <cstdint>

#include "inference/text/unicode_tables.h"

namespace cubeforge::unicode {
namespace {

using namespace unicode_data;

bool in_ranges(const CodepointRange* ranges, size_t count, char32_t code_point) {
  const CodepointRange* end = ranges + count;
  // First range whose last code point is not below the one asked about.
  const CodepointRange* it = std::lower_bound(
      ranges, end, code_point, [](const CodepointRange& range, char32_t cp) { return range.last < cp; });
  return it != end && it->first <= code_point;
}

uint8_t combining_class(char32_t code_point) {
  if (code_point < 0x300) return 0;  // nothing below U+0300 combines
  const CombiningClassRange* begin = kCombiningClassRanges;
  const CombiningClassRange* end = begin + kCombiningClassRanges_count;
  const CombiningClassRange* it = std::lower_bound(
      begin, end, code_point, [](const CombiningClassRange& range, char32_t cp) { return range.last < cp; });
  return (it != end && it->first <= code_point) ? it->combining_class : 0;
}

// Hangul syllables decompose and compose arithmetically (Unicode 3.12).
constexpr char32_t kHangulSBase = 0xAC00, kHangulLBase = 0x1100, kHangulVBase = 0x1161,
                   kHangulTBase = 0x11A7;
constexpr int kHangulLCount = 19, kHangulVCount = 21, kHangulTCount = 28;
constexpr int kHangulNCount = kHangulVCount * kHangulTCount;
constexpr int kHangulSCount = kHangulLCount * kHangulNCount;

void append_canonical_decomposition(char32_t code_point, std::u32string& out) {
  if (code_point >= kHangulSBase && code_point < kHangulSBase + kHangulSCount) {
    const int index = int(code_point - kHangulSBase);
    out.push_back(kHangulLBase + index / kHangulNCount);
    out.push_back(kHangulVBase + (index % kHangulNCount) / kHangulTCount);
    if (index % kHangulTCount != 0) out.push_back(kHangulTBase + index % kHangulTCount);
    return;
  }
  const CanonicalDecomposition* begin = kCanonicalDecompositions;
  const CanonicalDecomposition* end = begin + kCanonicalDecompositions_count;
  const CanonicalDecomposition* it = std::lower_bound(
      begin, end, code_point, [](const CanonicalDecomposition& d, char32_t cp) { return d.composite < cp; });
  if (it == end || it->composite != code_point) {
    out.push_back(code_point);
    return;
  }
  append_canonical_decomposition(it->first, out);
  if (it->second != 0) append_canonical_decomposition(it->second, out);
}

// The primary composite of (first, second), or 0 when there is none.
char32_t compose_pair(char32_t first, char32_t second) {
  if (first >= kHangulLBase && first < kHangulLBase + kHangulLCount && second >= kHangulVBase &&
      second < kHangulVBase + kHangulVCount) {
    return kHangulSBase + (int(first - kHangulLBase) * kHangulVCount + int(second - kHangulVBase)) * kHangulTCount;
  }
  if (first >= kHangulSBase && first < kHangulSBase + kHangulSCount &&
      (first - kHangulSBase) % kHangulTCount == 0 && second > kHangulTBase &&
      second < kHangulTBase + kHangulTCount) {
    return first + (second - kHangulTBase);
  }
  const CanonicalComposition* begin = kCanonicalCompositions;
  const CanonicalComposition* end = begin + kCanonicalCompositions_count;
  const CanonicalComposition* it = std::lower_bound(
      begin, end, std::pair<char32_t, char32_t>(first, second),
      [](const CanonicalComposition& c, const std::pair<char32_t, char32_t>& key) {
        return c.first != key.first ? c.first < key.first : c.second < key.second;
      });
  return (it != end && it->first == first && it->second == second) ? it->composite : 0;
}

}  // namespace

std::u32string decode_utf8(std::string_view bytes) {
  std::u32string out;
  out.reserve(bytes.size());
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t size = bytes.size();
  size_t i = 0;
  while (i < size) {
    const unsigned char lead = data[i];
    if (lead < 0x80) {
      out.push_back(lead);
      ++i;
      continue;
    }
    int length = 0;
    char32_t value = 0;
    // The allowed range of the second byte narrows for E0, ED, F0 and F4 so
    // that overlong forms, surrogates and values past U+10FFFF are rejected
    // at the first byte that proves them wrong (Unicode table 3-7).
    unsigned char second_min = 0x80, second_max = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2;
      value = lead & 0x1F;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3;
      value = lead & 0x0F;
      if (lead == 0xE0) second_min = 0xA0;
      if (lead == 0xED) second_max = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4;
      value = lead & 0x07;
      if (lead == 0xF0) second_min = 0x90;
      if (lead == 0xF4) second_max = 0x8F;
    } else {
      out.push_back(kReplacementCharacter);
      ++i;
      continue;
    }
    size_t consumed = 1;
    bool complete = true;
    for (int k = 1; k < length; ++k) {
      if (i + consumed >= size) {
        complete = false;
        break;
      }
      const unsigned char next = data[i + consumed];
      const unsigned char low = k == 1 ? second_min : 0x80;
      const unsigned char high = k == 1 ? second_max : 0xBF;
      if (next < low || next > high) {
        complete = false;
        break;
      }
      value = (value << 6) | (next & 0x3F);
      ++consumed;
    }
    out.push_back(complete ? value : kReplacementCharacter);
    i += consumed;
  }
  return out;
}

void append_utf8(char32_t code_point, std::string& out) {
  if (code_point > 0x10FFFF || (code_point >= 0xD800 && code_point <= 0xDFFF)) code_point = kReplacementCharacter;
  if (code_point < 0x80) {
    out.push_back(char(code_point));
  } else if (code_point < 0x800) {
    out.push_back(char(0xC0 | (code_point >> 6)));
    out.push_back(char(0x80 | (code_point & 0x3F)));
  } else if (code_point < 0x10000) {
    out.push_back(char(0xE0 | (code_point >> 12)));
    out.push_back(char(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(char(0x80 | (code_point & 0x3F)));
  } else {
    out.push_back(char(0xF0 | (code_point >> 18)));
    out.push_back(char(0x80 | ((code_point >> 12) & 0x3F)));
    out.push_back(char(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(char(0x80 | (code_point & 0x3F)));
  }
}

std::string encode_utf8(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t code_point : text) append_utf8(code_point, out);
  return out;
}

bool is_letter(char32_t code_point) {
  if (code_point < 0x80) return (code_point | 0x20) >= 'a' && (code_point | 0x20) <= 'z';
  return in_ranges(kLetterRanges, kLetterRanges_count, code_point);
}

bool is_number(char32_t code_point) {
  if (code_point < 0x80) return code_point >= '0' && code_point <= '9';
  return in_ranges(kNumberRanges, kNumberRanges_count, code_point);
}

bool is_whitespace(char32_t code_point) {
  switch (code_point) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x20: case 0x85: case 0xA0:
    case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return code_point >= 0x2000 && code_point <= 0x200A;
  }
}

void append_lowercase(char32_t code_point, std::u32string& out) {
  if (code_point < 0x80) {
    out.push_back(code_point >= 'A' && code_point <= 'Z' ? code_point + 32 : code_point);
    return;
  }
  if (code_point == 0x130) {  // LATIN CAPITAL LETTER I WITH DOT ABOVE: "i" + COMBINING DOT ABOVE
    out.push_back(U'i');
    out.push_back(0x307);
    return;
  }
  const CodepointMapping* begin = kLowercaseMappings;
  const CodepointMapping* end = begin + kLowercaseMappings_count;
  const CodepointMapping* it = std::lower_bound(
      begin, end, code_point, [](const CodepointMapping& m, char32_t cp) { return m.from < cp; });
  out.push_back((it != end && it->from == code_point) ? it->to : code_point);
}

std::u32string to_nfc(std::u32string_view text) {
  // Fast path: ASCII is always NFC.
  if (std::all_of(text.begin(), text.end(), [](char32_t c) { return c < 0x80; })) return std::u32string(text);

  std::u32string decomposed;
  decomposed.reserve(text.size() + 8);
  for (char32_t code_point : text) append_canonical_decomposition(code_point, decomposed);

  // Canonical ordering: a stable sort of each run of non-starters by class.
  for (size_t i = 0; i < decomposed.size();) {
    if (combining_class(decomposed[i]) == 0) {
      ++i;
      continue;
    }
    size_t run_end = i;
    while (run_end < decomposed.size() && combining_class(decomposed[run_end]) != 0) ++run_end;
    std::stable_sort(decomposed.begin() + i, decomposed.begin() + run_end,
                     [](char32_t a, char32_t b) { return combining_class(a) < combining_class(b); });
    i = run_end;
  }

  // Composition: a character joins the last starter unless something between
  // them blocks it (a starter, or a mark of the same or a higher class).
  std::u32string composed;
  composed.reserve(decomposed.size());
  std::ptrdiff_t starter = -1;
  int last_class = 0;
  for (char32_t code_point : decomposed) {
    const int cls = combining_class(code_point);
    if (starter >= 0) {
      const bool adjacent = std::ptrdiff_t(composed.size()) - 1 == starter;
      if (adjacent || (last_class != 0 && last_class < cls)) {
        if (char32_t composite = compose_pair(composed[size_t(starter)], code_point)) {
          composed[size_t(starter)] = composite;
          continue;
        }
      }
    }
    if (cls == 0) starter = std::ptrdiff_t(composed.size());
    last_class = cls;
    composed.push_back(code_point);
  }
  return composed;
}

const char* table_version() { return unicode_data::kUnicodeVersion; }

}  // namespace cubeforge::unicode
