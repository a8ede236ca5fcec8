// The app's words for the engine's options: the control that sets each one,
// so an error about an option (Error::option) tells a creator what to change
// in the window, not which command-line flag.
#pragma once

#include <string>

#include "inference/core/result.h"
#include "inference/options/engine_options.h"

namespace cubeforge::app {

// The label of the control that sets `key` ("Cache compression", "Vary with the seed").
const char* control_for(OptionKey key);

// The loaded weights for a creator: "exact weights", "weights at half size".
std::string weights_in_words(WeightFormat format);

// An error as the app shows it: "KV rank: <what is wrong>" when it names an
// option, else "<kind>: <what is wrong>"; untrusted text escaped.
std::string for_creator(const Error& error);

}  // namespace cubeforge::app
