// libFuzzer target: the safetensors header parser must reject or accept any
// byte string without crashing, and whatever it accepts must be in bounds.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "inference/tensor/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  auto header = cubeforge::parse_safetensors_header(bytes, "fuzz-input");
  if (!header.ok()) return 0;
  for (const auto& t : header->tensors) {
    // Accepted ranges must lie inside the input; touching them would trip ASan otherwise.
    if (header->data_offset + t.end > size) std::abort();
    if (t.end > t.begin) {
      volatile uint8_t first = data[header->data_offset + t.begin];
      volatile uint8_t last = data[header->data_offset + t.end - 1];
      (void)first;
      (void)last;
    }
  }
  return 0;
}
