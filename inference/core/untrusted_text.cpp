// Escaping of untrusted text for terminals, logs and JSON.
#include "inference/core/untrusted_text.h"

#include <cstdint>
#include <cstdio>

namespace cubeforge {

namespace {

// Length of the valid UTF-8 sequence starting at text[i] and its code point,
// or 0 when the bytes there are not one (overlong forms and surrogates included).
size_t utf8_sequence(std::string_view text, size_t i, uint32_t* code_point) {
  const auto byte = [&](size_t k) { return uint8_t(text[k]); };
  const uint8_t lead = byte(i);
  size_t length;
  uint32_t value;
  if (lead < 0x80) {
    *code_point = lead;
    return 1;
  } else if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
    value = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    value = lead & 0x0F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    value = lead & 0x07;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  for (size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    value = (value << 6) | (byte(i + k) & 0x3F);
  }
  if ((length == 3 && value < 0x800) || (length == 4 && (value < 0x10000 || value > 0x10FFFF)) ||
      (value >= 0xD800 && value <= 0xDFFF))
    return 0;
  *code_point = value;
  return length;
}

// Characters a terminal acts on (C0, DEL, C1).
bool is_control(uint32_t c) { return c < 0x20 || c == 0x7F || (c >= 0x80 && c <= 0x9F); }

// Characters that show nothing or change the direction of what follows: the
// format characters of Unicode (category Cf) that are not visible signs, the
// line and paragraph separators, and letters drawn as blank (fillers).
bool is_invisible(uint32_t c) {
  return c == 0x00AD ||                      // soft hyphen
         c == 0x034F ||                      // combining grapheme joiner
         c == 0x061C ||                      // Arabic letter mark
         c == 0x115F || c == 0x1160 ||       // Hangul fillers
         c == 0x17B4 || c == 0x17B5 ||       // Khmer inherent vowels
         (c >= 0x180B && c <= 0x180F) ||     // Mongolian variation selectors and vowel separator
         (c >= 0x200B && c <= 0x200F) ||     // zero-width space, non-joiner, joiner; LRM, RLM
         (c >= 0x2028 && c <= 0x202E) ||     // line and paragraph separators; embeddings and overrides
         (c >= 0x2060 && c <= 0x206F) ||     // word joiner, invisible operators, isolates, deprecated formats
         c == 0x3164 || c == 0xFFA0 ||       // Hangul fillers
         c == 0xFEFF ||                      // byte order mark, zero-width no-break space
         (c >= 0xFFF9 && c <= 0xFFFB) ||     // interlinear annotation
         (c >= 0x1D173 && c <= 0x1D17A) ||   // musical formatting
         (c >= 0xE0000 && c <= 0xE007F);     // tag characters
}

// Appends the escaped form of text[i...] to `out` until the text ends or `out`
// reaches `max_bytes`; returns where it stopped.
size_t escape_into(std::string& out, std::string_view text, size_t i, size_t max_bytes) {
  char buffer[16];
  while (i < text.size() && out.size() < max_bytes) {
    uint32_t code_point = 0;
    const size_t length = utf8_sequence(text, i, &code_point);
    if (length == 0) {
      std::snprintf(buffer, sizeof buffer, "\\x%02X", unsigned(uint8_t(text[i])));
      out += buffer;
      ++i;
      continue;
    }
    if (is_control(code_point)) {
      std::snprintf(buffer, sizeof buffer, "\\x%02X", unsigned(code_point));
      out += buffer;
    } else if (is_invisible(code_point)) {
      std::snprintf(buffer, sizeof buffer, "\\u{%04X}", unsigned(code_point));
      out += buffer;
    } else {
      out.append(text.substr(i, length));
    }
    i += length;
  }
  return i;
}

std::string length_note(size_t bytes) { return "... (" + std::to_string(bytes) + " bytes in all)"; }

}  // namespace

std::string escape_untrusted(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  escape_into(out, text, 0, std::string::npos);
  return out;
}

std::string readable_untrusted(std::string_view text, size_t max_bytes) {
  std::string out;
  const size_t stopped = escape_into(out, text, 0, max_bytes);
  if (stopped < text.size()) out += length_note(text.size());
  return out;
}

std::string quoted_untrusted(std::string_view text) { return single_quoted(readable_untrusted(text)); }

std::string escape_untrusted_lines(std::string_view text, size_t max_bytes) {
  std::string out;
  size_t start = 0;
  while (start < text.size() && out.size() < max_bytes) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(start, end - start);
    const size_t stopped = escape_into(out, line, 0, max_bytes);
    if (stopped < line.size()) break;
    if (end < text.size()) out += '\n';
    start = end + 1;
  }
  if (start < text.size()) out += length_note(text.size());
  return out;
}

// Built by appending: GCC 12 warns (-Wrestrict, wrongly) about "'" + std::string.
std::string single_quoted(std::string_view text) {
  std::string quoted;
  quoted.reserve(text.size() + 2);
  quoted.append(1, '\'').append(text).append(1, '\'');
  return quoted;
}

}  // namespace cubeforge
