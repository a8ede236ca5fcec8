// Script parsing: see script.h.
#include "app/desktop/core/script.h"

#include <cctype>
#include <cstdlib>
#include <map>
#include <sstream>

#include "inference/core/checked_number.h"
#include "inference/core/file_io.h"

namespace cubeforge::app {

namespace {

std::string trim(const std::string& text) {
  size_t begin = text.find_first_not_of(" \t\r");
  if (begin == std::string::npos) return "";
  size_t end = text.find_last_not_of(" \t\r");
  return text.substr(begin, end - begin + 1);
}

std::vector<std::string> whitespace_words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

// A position or a distance in window pixels (a word that is none is a widget's name).
bool parse_number(const std::string& text, float& value) {
  constexpr NumberRange<float> kPixels{-1e6f, 1e6f};
  auto number = narrow_number_text<float>(text, kPixels, {"", "script coordinate"});
  if (number.ok()) value = *number;
  return number.ok();
}

// GLFW's key codes for the names a chord may use.
int key_code(const std::string& name) {
  if (name.size() == 1 && name[0] >= 'a' && name[0] <= 'z') return 'A' + (name[0] - 'a');
  if (name.size() == 1 && name[0] >= '0' && name[0] <= '9') return name[0];
  if (name.size() >= 2 && name[0] == 'f' && name.find_first_not_of("0123456789", 1) == std::string::npos) {
    int n = std::atoi(name.c_str() + 1);
    if (n >= 1 && n <= 12) return 289 + n;
  }
  static const std::map<std::string, int> named = {
      {"space", 32},   {"enter", 257},     {"return", 257}, {"escape", 256}, {"tab", 258},   {"backspace", 259},
      {"delete", 261}, {"right", 262},     {"left", 263},   {"down", 264},   {"up", 265},    {"home", 268},
      {"end", 269},    {"shift", 340},     {"ctrl", 341},   {"alt", 342},    {"super", 343},
  };
  auto found = named.find(name);
  return found == named.end() ? -1 : found->second;
}

// Fills the command's fields from its argument; an error message, or empty.
std::string parse_arguments(ScriptCommand& command) {
  using K = ScriptCommand::Kind;
  const std::vector<std::string> words = whitespace_words(command.argument);
  switch (command.kind) {
    case K::kClick:
    case K::kDrag:
    case K::kDragRight: {
      const size_t moves = command.kind == K::kClick ? 0 : 2;
      size_t at = 0;
      if (words.size() == 1 + moves && !parse_number(words[0], command.x)) {
        command.target = words[0];
        at = 1;
      } else if (words.size() == 2 + moves && parse_number(words[0], command.x) && parse_number(words[1], command.y)) {
        at = 2;
      } else {
        return "takes a widget name or X Y" + std::string(moves ? ", then DX DY" : "");
      }
      if (moves && !(parse_number(words[at], command.dx) && parse_number(words[at + 1], command.dy)))
        return "takes DX DY after where it starts";
      return "";
    }
    case K::kKey: {
      std::string chord = command.argument;
      for (size_t start = 0; start <= chord.size();) {
        size_t plus = chord.find('+', start);
        std::string name = chord.substr(start, plus == std::string::npos ? std::string::npos : plus - start);
        for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        int code = key_code(name);
        if (code < 0) return "does not know the key '" + name + "'";
        command.keys.push_back(code);
        if (plus == std::string::npos) break;
        start = plus + 1;
      }
      return "";
    }
    case K::kResize: {
      float w = 0, h = 0;
      if (words.size() != 2 || !parse_number(words[0], w) || !parse_number(words[1], h) || w < 64 || h < 64 ||
          w > 16384 || h > 16384)
        return "takes a width and a height in pixels (at least 64)";
      command.width = static_cast<int>(w);
      command.height = static_cast<int>(h);
      return "";
    }
    default:
      return "";
  }
}

}  // namespace

bool ScriptCommand::waits_for_idle() const {
  switch (kind) {
    case Kind::kCancel:
    case Kind::kClick:
    case Kind::kDrag:
    case Kind::kDragRight:
    case Kind::kKey:
    case Kind::kType:
    case Kind::kResize:
    case Kind::kResetLayout:
    case Kind::kDump:
    case Kind::kErrorPopup:
    case Kind::kWaitPreview:
    case Kind::kHoldPreviews:
      return false;
    default:
      return true;
  }
}

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
      {"rest", ScriptCommand::Kind::kRest, true},         {"calibrate", ScriptCommand::Kind::kCalibrate, false},
      {"export", ScriptCommand::Kind::kExport, true},
      {"screenshot", ScriptCommand::Kind::kScreenshot, true}, {"quit", ScriptCommand::Kind::kQuit, false},
      {"click", ScriptCommand::Kind::kClick, true},       {"drag", ScriptCommand::Kind::kDrag, true},
      {"drag-right", ScriptCommand::Kind::kDragRight, true}, {"key", ScriptCommand::Kind::kKey, true},
      {"type", ScriptCommand::Kind::kType, true},         {"resize", ScriptCommand::Kind::kResize, true},
      {"reset-layout", ScriptCommand::Kind::kResetLayout, false}, {"dump", ScriptCommand::Kind::kDump, true},
      {"error-popup", ScriptCommand::Kind::kErrorPopup, false},
      {"wait-preview", ScriptCommand::Kind::kWaitPreview, false},
      {"hold-previews", ScriptCommand::Kind::kHoldPreviews, false},
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
    if (match->kind == ScriptCommand::Kind::kRest &&
        (argument.find_first_not_of("0123456789") != std::string::npos || argument.size() > 4))
      return make_error(ErrorCode::kInvalidArgument,
                        "script line " + std::to_string(line) + ": 'rest' takes a number of wakeups (at most 9999)");
    ScriptCommand command;
    command.kind = match->kind;
    command.argument = argument;
    command.line = line;
    if (std::string problem = parse_arguments(command); !problem.empty())
      return make_error(ErrorCode::kInvalidArgument,
                        "script line " + std::to_string(line) + ": '" + verb + "' " + problem);
    commands.push_back(std::move(command));
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
