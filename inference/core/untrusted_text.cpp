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

// Characters a terminal acts on or that hide or reorder text.
bool needs_escape(uint32_t c) {
  return c < 0x20 || c == 0x7F || (c >= 0x80 && c <= 0x9F) || c == 0x200E || c == 0x200F ||
         (c >= 0x202A && c <= 0x202E) || (c >= 0x2066 && c <= 0x2069);
}

}  // namespace

std::string escape_untrusted(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  char buffer[16];
  for (size_t i = 0; i < text.size();) {
    uint32_t code_point = 0;
    const size_t length = utf8_sequence(text, i, &code_point);
    if (length == 0) {
      std::snprintf(buffer, sizeof buffer, "\\x%02X", unsigned(uint8_t(text[i])));
      out += buffer;
      ++i;
      continue;
    }
    if (needs_escape(code_point)) {
      if (code_point < 0x100) std::snprintf(buffer, sizeof buffer, "\\x%02X", unsigned(code_point));
      else std::snprintf(buffer, sizeof buffer, "\\u{%04X}", unsigned(code_point));
      out += buffer;
    } else {
      out.append(text.substr(i, length));
    }
    i += length;
  }
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
