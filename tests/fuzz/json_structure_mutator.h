// A structure-aware libFuzzer mutator for targets whose input is JSON (after
// a fixed-length prefix). Byte mutations rarely make what breaks parsers and
// importers: nesting a hundred levels deeper, an array repeated a thousand
// times, a count of 2^32, an index that closes a cycle, a key given twice.
// This mutator parses the input and makes those, on a value chosen at random;
// a quarter of the time, or when the input is not JSON, it leaves the bytes
// to libFuzzer's own mutations. Harnesses call it from
// LLVMFuzzerCustomMutator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace cubeforge::fuzz {

using json = nlohmann::json;

// Every value under `root` (root included), without recursion.
inline std::vector<json*> all_values(json& root) {
  std::vector<json*> values, pending = {&root};
  while (!pending.empty() && values.size() < 100000) {
    json* value = pending.back();
    pending.pop_back();
    values.push_back(value);
    if (value->is_structured())
      for (auto& child : *value) pending.push_back(&child);
  }
  return values;
}

// Gives one object member of `text` (serialised JSON) a twin right after it:
// {"a":1,"b":2} -> {"a":1,"a":1,"b":2}.
inline void duplicate_a_member(std::string& text, std::minstd_rand& random) {
  std::vector<size_t> keys;  // where a key's opening quote is
  bool in_string = false;
  char previous = 0;  // the last character outside strings that is not a space
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
      if (previous == '{' || previous == ',') {
        // A key when an object holds it: the next character outside the string is ':'.
        size_t end = i + 1;
        while (end < text.size() && text[end] != '"') end += text[end] == '\\' ? 2 : 1;
        if (end + 1 < text.size() && text[end + 1] == ':') keys.push_back(i);
      }
    }
    if (c != ' ') previous = c;
  }
  if (keys.empty()) return;
  const size_t start = keys[random() % keys.size()];
  int depth = 0;
  in_string = false;
  size_t end = start;
  for (; end < text.size(); ++end) {
    const char c = text[end];
    if (in_string) {
      if (c == '\\') ++end;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '{' || c == '[') ++depth;
    else if ((c == '}' || c == ']') && depth-- == 0) break;
    else if (c == ',' && depth == 0) break;
  }
  const std::string member = text.substr(start, end - start);
  text.insert(end, "," + member);
}

inline size_t mutate_json(uint8_t* data, size_t size, size_t max_size, unsigned seed, size_t prefix) {
  std::minstd_rand random(seed);
  if (size <= prefix || random() % 4 == 0) return LLVMFuzzerMutate(data, size, max_size);
  json root = json::parse(data + prefix, data + size, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return LLVMFuzzerMutate(data, size, max_size);
  std::vector<json*> values = all_values(root);
  json* target = values[random() % values.size()];
  std::string text;
  switch (random() % 6) {
    case 0: {  // nest deeper
      const int levels = 1 + int(random() % 200);
      const bool arrays = random() % 2;
      json value = std::move(*target);
      for (int i = 0; i < levels; ++i) value = arrays ? json::array({std::move(value)}) : json{{"a", std::move(value)}};
      *target = std::move(value);
      break;
    }
    case 1: {  // repeat: an element of an array, a member of an object, or the value itself
      const size_t copies = 1 + random() % 2000;
      if (target->is_array() && !target->empty()) {
        const json element = (*target)[random() % target->size()];
        for (size_t i = 0; i < copies; ++i) target->push_back(element);
      } else if (target->is_object() && !target->empty()) {
        auto member = target->begin();
        std::advance(member, random() % target->size());
        const json value = member.value();
        for (size_t i = 0; i < copies; ++i) (*target)["k" + std::to_string(i)] = value;
      } else {
        const json value = *target;
        *target = json::array();
        for (size_t i = 0; i < copies; ++i) target->push_back(value);
      }
      break;
    }
    case 2: {  // an edge of a number's range
      static const json numbers[] = {0,        1,          -1,          3,          255,        256,
                                     65535,    2147483647, 2147483648u, 4294967295u, 4294967296u, 9007199254740993u,
                                     UINT64_MAX, INT64_MIN, 1e308,      -1e308,     0.5,        3e38};
      *target = numbers[random() % (sizeof numbers / sizeof numbers[0])];
      break;
    }
    case 3:  // a small index: references between nodes, meshes, accessors
      *target = random() % 4;
      break;
    case 4: {  // another value of the document, copied here
      const json copy = *values[random() % values.size()];
      *target = copy;
      break;
    }
    default:  // a key given twice
      text = root.dump();
      duplicate_a_member(text, random);
      break;
  }
  if (text.empty()) text = root.dump();
  if (prefix + text.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::memcpy(data + prefix, text.data(), text.size());
  return prefix + text.size();
}

}  // namespace cubeforge::fuzz
