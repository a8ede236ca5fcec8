// Text that came from outside (file contents, tensor names, vocabulary
// entries, prompts, paths) made safe to print and to put in JSON.
//
// A model file or a mesh can hold any bytes. Printed raw, an escape sequence
// in a tensor name retitles or clears the user's terminal; put raw into JSON,
// invalid UTF-8 makes the serialiser throw; a bidirectional override or a
// zero-width character makes text read as something it is not. escape_untrusted()
// keeps valid, printable UTF-8 as it is and writes everything else as visible
// escapes: control characters (C0, DEL, C1) and invalid UTF-8 bytes become
// \xNN; invisible and direction-changing characters (bidirectional marks,
// overrides and isolates, zero-width spaces and joiners, the byte order mark,
// line and paragraph separators, soft hyphens, fillers, tag characters) become
// \u{NNNN}. The result is valid UTF-8 with no control characters, and escaping
// it again changes nothing, so a message may be escaped at every sink it passes.
//
// A name can also be long enough to flood a terminal (a 20 MiB tensor name):
// readable_untrusted() escapes and cuts to a readable length, saying how long
// the whole was; every message that quotes a name from a file uses it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace cubeforge {

std::string escape_untrusted(std::string_view text);

// How much of an untrusted string a message shows (escaped bytes).
inline constexpr size_t kReadableBytes = 256;

// escape_untrusted(text), cut after about `max_bytes` with
// "... (N bytes in all)" when longer. Only the part shown is escaped, so a
// huge string costs nothing.
std::string readable_untrusted(std::string_view text, size_t max_bytes = kReadableBytes);

// single_quoted(readable_untrusted(text)): how messages quote a name from a file.
std::string quoted_untrusted(std::string_view text);

// Text of several lines (another library's message, a help text): each line
// escaped, the line breaks kept; the whole cut at `max_bytes`.
std::string escape_untrusted_lines(std::string_view text, size_t max_bytes = 16 * kReadableBytes);

// 'text', as messages quote file and tensor names (escape them first when
// they came from outside).
std::string single_quoted(std::string_view text);

}  // namespace cubeforge
