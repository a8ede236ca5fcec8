// The JSON form of a generation's result (generation_report.h).
#include "inference/pipeline/generation_report.h"

namespace cubeforge {

nlohmann::json to_json(const StageTimings& t) {
  return {{"text_ms", t.text_ms},           {"prefill_ms", t.prefill_ms},
          {"decode_ms", t.decode_ms},       {"shape_decode_ms", t.shape_decode_ms},
          {"occupancy_ms", t.occupancy_ms}, {"meshing_ms", t.meshing_ms},
          {"cleanup_ms", t.cleanup_ms},     {"total_ms", t.total_ms()}};
}

nlohmann::json to_json(const DecodingStats& stats, const DecodingOptions& options) {
  nlohmann::json j = {{"mode", decoding_mode_name(stats.mode)},
                      {"model_evaluations", stats.model_evaluations},
                      {"tokens_per_evaluation", stats.tokens_per_evaluation()},
                      {"tokens_per_step", stats.tokens_per_step},
                      {"positions_per_step", stats.positions_per_step}};
  if (stats.mode == DecodingMode::kJacobi) {
    j["max_guesses"] = options.jacobi.max_guesses;
    j["guess_cost"] = options.jacobi.position_cost;
    j["guessed"] = stats.guessed;
    j["guesses_accepted"] = stats.guesses_accepted;
  } else if (stats.mode == DecodingMode::kDiffusion) {
    j["cache"] = diffusion_cache_name(options.diffusion.cache);
    if (options.diffusion.factor > 0.f)
      j["factor"] = options.diffusion.factor;
    else
      j["threshold"] = options.diffusion.threshold;
  }
  return j;
}

nlohmann::json to_json(const GenerationResult& result, const GenerationRequest& request) {
  const MeshStatistics& s = result.stats;
  return {
      {"tokens", result.tokens},
      {"timings", to_json(result.timings)},
      {"time_to_first_token_ms", result.time_to_first_token_ms},
      {"tokens_per_second", result.tokens_per_second},
      {"guidance", request.guidance_scale},
      {"kv_cache",
       {{"format", kv_format_name(request.kv_cache.format)},
        {"budget", request.kv_cache.budget},
        {"rank", request.kv_cache.rank}}},
      {"mesh",
       {{"vertices", s.vertices},
        {"faces", s.faces},
        {"faces_before_cleanup", s.faces_before_cleanup},
        {"occupancy_points", s.occupancy_points},
        {"latent_top_k", request.latent_top_k},
        {"dense_points", s.dense_points},
        {"floaters_removed", s.floaters_removed},
        {"pieces", s.pieces},
        {"pieces_as_extracted", s.pieces_as_extracted},
        {"simplification",
         {{"fins_removed", s.simplification.fins_removed},
          {"vertices_split", s.simplification.vertices_split},
          {"slivers_removed", s.simplification.slivers_removed},
          {"retries_to_stay_closed_and_whole", s.simplification.retries_to_stay_closed_and_whole},
          {"left_unsimplified_to_stay_closed_and_whole",
           s.simplification.left_unsimplified_to_stay_closed_and_whole}}}}},
      {"decoding", to_json(result.decoding, request.decoding)},
  };
}

}  // namespace cubeforge
