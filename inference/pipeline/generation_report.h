// One JSON form of a generation's result, for every reporter: the command
// line's --json, the app's log and the tests read the same fields.
#pragma once

#include <nlohmann/json.hpp>

#include "inference/pipeline/generation.h"

namespace cubeforge {

// Stage timings in ms and their total.
nlohmann::json to_json(const StageTimings& timings);
// What a decoding did: model evaluations, tokens per evaluation and per step,
// and the options of its strategy that shaped it.
nlohmann::json to_json(const DecodingStats& stats, const DecodingOptions& options);
// The tokens, timings, time to first token, tokens/s, mesh statistics and
// decoding of `result`, as `request` asked for it.
nlohmann::json to_json(const GenerationResult& result, const GenerationRequest& request);

}  // namespace cubeforge
