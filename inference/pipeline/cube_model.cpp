// Model folder loading and cross-checks between its parts.
#include "inference/pipeline/cube_model.h"

#include <cstdlib>

#include "inference/core/file_io.h"
#include "inference/core/untrusted_text.h"

namespace cubeforge {

const char* const kModelFolderHelp =
    "a model folder holds shape_gpt.safetensors, shape_tokenizer.safetensors, an optional config.yaml "
    "and clip/ (a Hugging Face CLIP folder). Assemble one with the Hugging Face CLI: "
    "`huggingface-cli download Roblox/cube3d-v0.5 --local-dir MODEL` and "
    "`huggingface-cli download openai/clip-vit-large-patch14 --local-dir MODEL/clip`";

namespace {

// A part of the folder that must be a file (or a folder): missing parts add
// how to assemble a model folder; a part that cannot be examined (a loop of
// symbolic links, no permission) or is the wrong kind says so.
Status require_part(const std::filesystem::path& path, FileKind wanted) {
  CUBEFORGE_ASSIGN_OR_RETURN(FileKind kind, file_kind(path));
  if (kind == wanted) return ok_status();
  if (kind == FileKind::kMissing)
    return make_error(ErrorCode::kNotFound, single_quoted(path.string()) + " does not exist; " + kModelFolderHelp);
  return make_error(ErrorCode::kInvalidArgument, single_quoted(path.string()) + " is " + describe_file_type(path) + ", not " +
                                                     (wanted == FileKind::kDirectory ? "a folder" : "a regular file") +
                                                     "; " + kModelFolderHelp);
}

}  // namespace

Result<CubeModel> CubeModel::load(const std::filesystem::path& folder, const LoadProgress& progress,
                                  const WeightOptions& weights) {
  auto step = [&](const std::string& what, double fraction) -> Status {
    if (progress && !progress(what, fraction))
      return make_error(ErrorCode::kCancelled, "loading '" + folder.string() + "' was cancelled");
    return ok_status();
  };
  if (folder.empty()) return make_error(ErrorCode::kInvalidArgument, std::string("no model folder given; ") + kModelFolderHelp);
  CUBEFORGE_TRY(require_part(folder, FileKind::kDirectory));
  const auto gpt_path = folder / "shape_gpt.safetensors";
  const auto shape_path = folder / "shape_tokenizer.safetensors";
  const auto clip_dir = folder / "clip";
  CUBEFORGE_TRY(require_part(gpt_path, FileKind::kRegular));
  CUBEFORGE_TRY(require_part(shape_path, FileKind::kRegular));
  CUBEFORGE_TRY(require_part(clip_dir, FileKind::kDirectory));

  CubeModel model;
  model.folder_ = folder;
  std::optional<ModelConfig> yaml;
  const auto yaml_path = folder / "config.yaml";
  CUBEFORGE_ASSIGN_OR_RETURN(FileKind yaml_kind, file_kind(yaml_path));
  if (yaml_kind != FileKind::kMissing) {  // optional, but when there it must be a readable file
    CUBEFORGE_TRY(step("reading config.yaml", 0.0));
    CUBEFORGE_ASSIGN_OR_RETURN(yaml, parse_model_config_yaml(yaml_path));
  }

  CUBEFORGE_TRY(step("loading the shape tokenizer", 0.05));
  CUBEFORGE_ASSIGN_OR_RETURN(ShapeTokenizer shape, ShapeTokenizer::load(shape_path, yaml ? &yaml->shape : nullptr));
  CUBEFORGE_TRY(step("loading the GPT", 0.25));
  CUBEFORGE_ASSIGN_OR_RETURN(DualStreamGpt gpt, DualStreamGpt::load(gpt_path, yaml ? &yaml->gpt : nullptr, weights));
  CUBEFORGE_TRY(step("loading CLIP", 0.6));
  CUBEFORGE_ASSIGN_OR_RETURN(ClipTokenizer tokenizer, ClipTokenizer::load(clip_dir));
  CUBEFORGE_ASSIGN_OR_RETURN(ClipTextEncoder text, ClipTextEncoder::load(clip_dir));

  model.config_.gpt = gpt.config();
  model.config_.shape = shape.config();
  if (yaml) model.config_.text_model_name = yaml->text_model_name;
  if (text.hidden_size() != gpt.config().text_width)
    return make_error(ErrorCode::kCorruptFile,
                      "'" + clip_dir.string() + "' produces " + std::to_string(text.hidden_size()) +
                          "-wide text features but '" + gpt_path.string() + "' expects " +
                          std::to_string(gpt.config().text_width) + "; use the CLIP model this GPT was trained with");
  if (tokenizer.vocab_size() > text.config().vocab_size)
    return make_error(ErrorCode::kCorruptFile,
                      "'" + (clip_dir / "vocab.json").string() + "' has token ids up to " +
                          std::to_string(tokenizer.vocab_size() - 1) + " but '" + (clip_dir / "model.safetensors").string() +
                          "' embeds " + std::to_string(text.config().vocab_size) +
                          " tokens; the vocabulary does not belong to this CLIP model");
  if (shape.config().codes != gpt.config().codes)
    return make_error(ErrorCode::kCorruptFile,
                      "'" + shape_path.string() + "' has " + std::to_string(shape.config().codes) + " codes but '" +
                          gpt_path.string() + "' has " + std::to_string(gpt.config().codes) +
                          "; the two files come from different models");
  if (shape.config().embed_dim != gpt.config().shape_embed_dim)
    return make_error(ErrorCode::kCorruptFile, "'" + shape_path.string() + "' and '" + gpt_path.string() +
                                                   "' disagree on the codebook vector size");
  CUBEFORGE_TRY(step("installing the codebook", 0.95));
  CUBEFORGE_TRY(gpt.install_codebook(shape.codebook()));
  model.gpt_.emplace(std::move(gpt));
  model.shape_.emplace(std::move(shape));
  model.tokenizer_.emplace(std::move(tokenizer));
  model.text_encoder_.emplace(std::move(text));
  CUBEFORGE_TRY(step("ready", 1.0));
  return model;
}

std::filesystem::path default_model_folder() {
  if (const char* env = std::getenv("CUBEFORGE_MODEL_DIR"); env && *env) return env;
#ifdef CUBEFORGE_SOURCE_DIR
  const std::filesystem::path builtin = std::filesystem::path(CUBEFORGE_SOURCE_DIR) / "assets" / "model";
  auto kind = file_kind(builtin / "shape_gpt.safetensors");
  if (kind.ok() && *kind == FileKind::kRegular) return builtin;
#endif
  return {};
}

}  // namespace cubeforge
