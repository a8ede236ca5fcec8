// Script parsing: see script.h.
#include "app/desktop/core/script.h"

#include <sstream>

#include "inference/core/file_io.h"

namespace cubeforge::app {

namespace {

std::string trim(const std::string& text) {
  size_t begin = text.find_first_not_of(" \t\r");
  if (begin == std::string::npos) return "";
  size_t end = text.find_last_not_of(" \t\r");
  return text.substr(begin, end - begin + 1);
}

}  // namespace

Result<std::vector<ScriptCommand>> parse_script(const std::string& text) {
  struct Verb {
    const char* name;
    ScriptCommand::Kind kind;
    bool takes_argument;
  };
  static const Verb verbs[] = {
      {"model", ScriptCommand::Kind::kModel, true},       {"prompt", ScriptCommand::Kind::kPrompt, true},
      {"set", ScriptCommand::Kind::kSet, true},           {"generate", ScriptCommand::Kind::kGenerate, false},
      {"latency", ScriptCommand::Kind::kLatency, false},  {"cancel", ScriptCommand::Kind::kCancel, false},
      {"wait", ScriptCommand::Kind::kWait, false},        {"idle", ScriptCommand::Kind::kIdle, true},
      {"export", ScriptCommand::Kind::kExport, true},
      {"screenshot", ScriptCommand::Kind::kScreenshot, true}, {"quit", ScriptCommand::Kind::kQuit, false},
  };
  std::vector<ScriptCommand> commands;
  std::istringstream in(text);
  std::string raw;
  for (int line = 1; std::getline(in, raw); ++line) {
    std::string content = trim(raw);
    if (content.empty() || content[0] == '#') continue;
    size_t space = content.find_first_of(" \t");
    std::string verb = content.substr(0, space);
    std::string argument = space == std::string::npos ? "" : trim(content.substr(space));
    const Verb* match = nullptr;
    for (const auto& v : verbs)
      if (verb == v.name) match = &v;
    if (!match)
      return make_error(ErrorCode::kInvalidArgument, "script line " + std::to_string(line) + ": unknown command '" +
                                                         verb + "'");
    if (match->takes_argument && argument.empty())
      return make_error(ErrorCode::kInvalidArgument,
                        "script line " + std::to_string(line) + ": '" + verb + "' needs an argument");
    if (!match->takes_argument && !argument.empty())
      return make_error(ErrorCode::kInvalidArgument,
                        "script line " + std::to_string(line) + ": '" + verb + "' takes no argument");
    if (match->kind == ScriptCommand::Kind::kSet && argument.find_first_of(" \t") == std::string::npos)
      return make_error(ErrorCode::kInvalidArgument,
                        "script line " + std::to_string(line) + ": 'set' needs a key and a value");
    if (match->kind == ScriptCommand::Kind::kIdle &&
        (argument.find_first_not_of("0123456789") != std::string::npos || argument.size() > 6))
      return make_error(ErrorCode::kInvalidArgument,
                        "script line " + std::to_string(line) + ": 'idle' takes a number of frames");
    commands.push_back({match->kind, argument, line});
  }
  return commands;
}

Result<std::vector<ScriptCommand>> load_script(const std::filesystem::path& path) {
  CUBEFORGE_ASSIGN_OR_RETURN(std::string text, read_file_text(path, uint64_t(16) << 20));
  auto commands = parse_script(text);
  if (!commands.ok())
    return make_error(commands.error().code, "script '" + path.string() + "': " + commands.error().message);
  return commands;
}

}  // namespace cubeforge::app
