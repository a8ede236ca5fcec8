// Unicode helpers for the CLIP tokenizer: UTF-8 decoding that never fails,
// the character classes of the CLIP pre-tokenisation pattern, lower-casing and
// NFC normalisation.
//
// Hugging Face's CLIPTokenizerFast normalises text with NFC, collapses
// whitespace and lower-cases it, then splits it with a pattern over \s, \p{L}
// and \p{N}. These functions give the same answers for every code point of the
// Unicode version the tables were generated from (unicode_tables.cpp says
// which); characters added in later versions count as unassigned.
#pragma once

#include <string>
#include <string_view>

namespace cubeforge::unicode {

inline constexpr char32_t kReplacementCharacter = 0xFFFD;

// Decodes UTF-8. Every ill-formed sequence (bad lead byte, truncated or
// overlong sequence, surrogate, value above U+10FFFF) becomes one U+FFFD per
// maximal ill-formed subpart, as Python's "replace" error handler does.
std::u32string decode_utf8(std::string_view bytes);
void append_utf8(char32_t code_point, std::string& out);
std::string encode_utf8(std::u32string_view text);

bool is_letter(char32_t code_point);      // general category L*
bool is_number(char32_t code_point);      // general category N*
bool is_whitespace(char32_t code_point);  // the White_Space property (regex \s)

// Full lower-case mapping of one character (U+0130 becomes two characters).
void append_lowercase(char32_t code_point, std::u32string& out);

// Canonical composition (NFC): canonical decomposition, canonical ordering of
// combining marks, then composition of primary composites.
std::u32string to_nfc(std::u32string_view text);

const char* table_version();

}  // namespace cubeforge::unicode
