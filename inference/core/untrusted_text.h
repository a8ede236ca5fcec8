// Text that came from outside (file contents, tensor names, vocabulary
// entries, prompts, paths) made safe to print and to put in JSON.
//
// A model file or a mesh can hold any bytes. Printed raw, an escape sequence
// in a tensor name retitles or clears the user's terminal; put raw into JSON,
// invalid UTF-8 makes the serialiser throw. escape_untrusted() keeps valid,
// printable UTF-8 as it is and writes everything else as visible escapes:
// control characters (C0, DEL, C1), invalid UTF-8 bytes and the invisible
// bidirectional overrides become \xNN (bytes) or \u{NNNN} (characters). The
// result is valid UTF-8 with no control characters, and escaping it again
// changes nothing, so a message may be escaped at every sink it passes.
#pragma once

#include <string>
#include <string_view>

namespace cubeforge {

std::string escape_untrusted(std::string_view text);

// 'text', as messages quote file and tensor names (escape them first when
// they came from outside).
std::string single_quoted(std::string_view text);

}  // namespace cubeforge
