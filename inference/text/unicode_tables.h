// Raw Unicode character tables behind inference/text/unicode.h.
//
// The arrays are generated (tools/generate_unicode_tables.py) and sorted by
// their first field so lookups are binary searches.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cubeforge::unicode_data {

struct CodepointRange {
  uint32_t first;
  uint32_t last;  // inclusive
};

struct CodepointMapping {
  uint32_t from;
  uint32_t to;
};

struct CombiningClassRange {
  uint32_t first;
  uint32_t last;  // inclusive
  uint8_t combining_class;
};

// One level of a canonical decomposition; `second` is 0 for singletons.
struct CanonicalDecomposition {
  uint32_t composite;
  uint32_t first;
  uint32_t second;
};

// A primary composite: (first, second) composes to `composite` under NFC.
struct CanonicalComposition {
  uint32_t first;
  uint32_t second;
  uint32_t composite;
};

extern const char kUnicodeVersion[];
extern const CodepointRange kLetterRanges[];
extern const size_t kLetterRanges_count;
extern const CodepointRange kNumberRanges[];
extern const size_t kNumberRanges_count;
extern const CodepointMapping kLowercaseMappings[];
extern const size_t kLowercaseMappings_count;
extern const CombiningClassRange kCombiningClassRanges[];
extern const size_t kCombiningClassRanges_count;
extern const CanonicalDecomposition kCanonicalDecompositions[];
extern const size_t kCanonicalDecompositions_count;
extern const CanonicalComposition kCanonicalCompositions[];
extern const size_t kCanonicalCompositions_count;

}  // namespace cubeforge::unicode_data
