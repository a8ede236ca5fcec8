// What the desktop app knows between frames, grouped by what it is about.
//
// The panels (panels/) read and edit it, the worker's messages
// (worker_messages.cpp) and the app's actions (app.cpp) update it, and the
// main loop (desktop_app.cpp) owns it. Plain data on the UI thread: no ImGui
// and no Vulkan handles, so a new panel or message starts from here.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "app/desktop/core/app_settings.h"
#include "app/desktop/core/export_target.h"
#include "app/desktop/core/generation_progress.h"
#include "app/desktop/core/generation_worker.h"
#include "app/desktop/core/history_store.h"
#include "app/desktop/core/latency_statistics.h"
#include "app/desktop/core/model_card.h"
#include "app/desktop/core/panel_layout.h"
#include "app/desktop/core/save_dialog.h"
#include "app/desktop/core/script.h"
#include "app/desktop/thumbnail_mosaic.h"
#include "engine/renderer.h"
#include "inference/geometry/mesh.h"
#include "inference/geometry/mesh_cleanup.h"

namespace cubeforge::app {

using Clock = std::chrono::steady_clock;

inline double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

struct FrameTimeSummary {
  int frames = 0;
  double mean_ms = 0, p95_ms = 0, max_ms = 0;
};

FrameTimeSummary summarise(std::vector<float> times);

// The model folder: what the field says, what is loading, how it went.
struct ModelState {
  std::string folder_field;    // the text field; becomes the model folder once it loads
  std::string loading_folder;  // empty when nothing loads
  std::string loading_weights;  // the weight format it loads with
  std::string load_step;
  double load_fraction = 0;
  std::string status;          // the last load's outcome, shown under the buttons
  std::string status_detail;   // the same in the engine's terms, for its tooltip
  std::optional<ModelCard> card;  // what the loaded model says it knows (card.json), if anything
};

// The current shape, which export writes and the viewport shows between runs:
// the last finished generation, the history entry or candidate picked, or a
// cancelled run's preview kept (previews are not, until kept).
struct CurrentShape {
  Mesh mesh;  // as it was made
  std::string prompt;
  uint64_t seed = 0;
  MeshPieces pieces;  // its connected pieces, counted once (find_pieces)
  // The mesh without its loose pieces, while the settings remove them
  // (empty otherwise), and the share of the largest piece it was made at.
  Mesh without_loose;
  std::optional<float> loose_fraction_applied;
};

// What a cancelled run leaves: its last preview, offered to keep instead of
// thrown away. It stays on screen until kept, put back or replaced by a run.
struct OfferedPreview {
  Mesh mesh;
  std::string what;  // "preview from 24 tokens", "coarse preview at resolution 5"
  std::string prompt;
  uint64_t seed = 0;
};

// The run in progress or last finished, as the statistics panel shows it.
struct GenerationState {
  bool generating = false;  // a generation or the latency demo runs
  GenerationProgress progress;
  Clock::time_point run_started;  // when the worker started the current run
  std::string weights, kv_cache;  // what the current run decodes with (kv_cache_label)
  int preview_uploads = 0;  // previews shown during this run
  std::string preview_shown;  // what the mesh on screen is while the run goes on
  Mesh last_preview;          // the run's latest preview, offered if the run is cancelled
  std::string last_preview_what;
  std::optional<OfferedPreview> offered_preview;
  std::optional<double> first_mesh_ms;  // from Generate to the first mesh on screen
  Clock::time_point requested;          // when Generate was pressed
  PreviewCost last_preview_cost;
  std::optional<double> last_decode_ms_without_preview;
  std::optional<double> last_decode_ms_with_preview;
  // The finished run's figures, as the log reports them; empty while it runs.
  std::optional<double> run_tokens_per_second, run_mean_tpot_ms;
  // The prompt Generate was last pressed with: its last word is judged even
  // with nothing typed after it.
  std::string generated_prompt;
};

// Several seeds of one prompt side by side (a 2x2 grid), to pick one.
constexpr int kCandidateCells = 56;  // thumbnail mosaic cells per side
struct Candidate {
  GenerationRequest request;  // what made it
  Mesh mesh;
  ThumbnailMosaic thumbnail;  // the engine's render of it
  double wall_ms = 0;
};
struct CandidateState {
  bool running = false;
  bool shown = false;  // the grid is open
  int count = 0;       // asked for
  int picked = -1;
  std::string prompt;
  GenerationRequest made_with;  // the first candidate's request: how they all sample
  std::vector<Candidate> items;
};

// The latency demo, a view of its own: its runs, which one is going, and
// each one's measurements as they arrive (several per run: the machine is
// noisy), reduced to a median, a spread and a verdict against the run's
// baseline (core/latency_statistics.h).
inline constexpr char kLatencyViewTitle[] = "Latency demo";  // its window
struct LatencyDemoState {
  bool running = false;
  bool shown = false;
  int current = -1;  // the run in progress
  int current_repeat = 0;
  int repeats = kLatencyDemoRepeats;
  std::vector<LatencyRun> runs;
  // By run: its measurements in the order they came, and why it did not run
  // (empty: it ran, or has not yet).
  std::vector<std::vector<worker_message::LatencyResult>> measured;
  std::vector<std::string> not_run;
  std::optional<worker_message::LatencyMeshed> meshed;  // the demo's one meshing
  std::optional<double> wall_ms;  // the whole demo, once finished

  // A run's time per token and time per object (to its last token).
  Spread tpot_ms(size_t run) const;
  Spread object_ms(size_t run) const;
  // Against the run's baseline (invalid: no baseline, or it did not run).
  std::optional<Comparison> tpot_against_baseline(size_t run) const;
  std::optional<Comparison> object_against_baseline(size_t run) const;
  // A parallel run's tokens per model evaluation (its last measurement's).
  std::optional<double> tokens_per_evaluation(size_t run) const;
  // The last measurement, if any.
  const worker_message::LatencyResult* last(size_t run) const;
  // What the demo says beside a run's bar: the median and range, the verdict
  // against its baseline, and for parallel decoding the tokens per model
  // evaluation: "0.24 ms (range 0.22 ms to 0.30 ms), within noise of KV
  // cache; 1.00 tokens per evaluation". `per_token`: time per token, else per object.
  std::string bar_text(size_t run, bool per_token) const;
};

// Frame times: recent frames for the plot, and the frames of the current run.
struct FrameTimes {
  static constexpr size_t kWindow = 240;
  std::deque<float> recent_ms;             // the last kWindow frames
  std::vector<float> while_generating_ms;  // frames while the current run generates
  FrameTimeSummary last_generation;
  // From a key press reaching the app to the end of the frame that shows it.
  std::vector<float> key_to_frame_ms, key_to_frame_generating_ms;

  void add(float frame_ms, bool generating);
};

struct HistoryState {
  std::optional<HistoryStore> store;  // empty when the history folder cannot be read
  // Why the history could not be read or the last run could not be kept:
  // shown in the History panel until a later write succeeds.
  std::string problem;
  // Thumbnails read so far by entry id; empty when the PNG could not be read.
  std::map<std::string, ThumbnailMosaic> thumbnails;
  // An entry picked while the prompt or settings differ from its: the panel
  // asks before replacing them.
  std::optional<HistoryEntry> pending_restore;
  bool open_restore_question = false;
};

// The Export panel: the last export's or screenshot's outcome, an export
// waiting for the person to confirm (create its folder, replace a file), and
// the desktop's Save-as dialog.
struct ExportState {
  std::string result;
  bool failed = false;
  std::optional<ExportTarget> pending;
  bool open_confirmation = false;  // open the confirmation popup this frame
  SaveDialog dialog;
};

struct LogLine {
  bool error = false;
  std::string text;
};

// The log: kept for the Log panel, written to the data folder's log file
// (the previous run's kept beside it as cubeforge.log.1) and to
// stdout/stderr. Errors also go to the message popup, every one of them
// until the person closes it.
struct AppLog {
  std::ofstream file;
  std::vector<LogLine> lines;
  int errors = 0;
  std::vector<std::string> popup_messages;  // errors not yet seen in the popup
  bool popup_pending = false;
  // Messages the popup has shown; it scrolls to the top of the first one
  // after these (a message gives its cause first and its hints last).
  size_t popup_shown = 0;
  // Scripts see the popup only when they ask for it (its modal would take
  // their clicks); whether it is open and its scroll as last drawn, for `dump`.
  bool popup_in_scripts = false;
  bool popup_open = false;
  float popup_scroll = 0, popup_scroll_max = 0;

  void info(const std::string& text) { add(false, text); }
  void error(const std::string& text) { add(true, text); }
  void add(bool error, const std::string& text);
};

// The 3D view behind the panels.
struct ViewState {
  engine::OrbitCamera camera;
  engine::SceneSettings scene;
  // The mouse button dragging the view (-1: none) and where the cursor was
  // when it last moved the camera: a drag moves by what happened since it
  // began in the view, never by where the cursor was before the press.
  int drag_button = -1;
  float drag_x = 0, drag_y = 0;
  size_t shown_faces = 0;  // faces of the mesh on screen
};

// The wireframe's opacity for a mesh of `faces` faces whose bounding sphere
// covers `radius_pixels` on screen: dense where edges are far apart, faint
// where thousands of edges would fill every pixel (20,000 faces seen whole).
float wireframe_opacity(size_t faces, float radius_pixels);

// The panels' places and the part of the window they leave free.
struct LayoutState {
  bool place_panels = true;     // put every panel at its layout place this frame
  // Asked for while panels are being drawn (the Reset layout button sits in a
  // later panel than some): applied to every panel from the next frame on.
  bool place_panels_next_frame = false;
  bool panels_hidden = false;   // Tab: the view alone
  float width = 0, height = 0;  // the window size the layout was made for
  PanelLayout layout;
  // Named widgets' places in the last frame, for scripts (`click generate`).
  std::map<std::string, Rect> targets;
  // Texts the panels showed in the last frame by name (a bar's overlay, a
  // plot's title, a disabled button's reason), for `dump`.
  std::map<std::string, std::string> texts;
  // Named widgets greyed out in the last frame because the engine refuses
  // what they would set, with the reason shown (for scripts' `dump`).
  std::map<std::string, std::string> refusals;
};

// The script (--script) and where it has got to.
struct ScriptState {
  std::vector<ScriptCommand> commands;
  size_t next = 0;
  int idle_frames_left = 0;  // `idle N`: frames still to count
  std::vector<float> idle_frame_ms;
  int rest_wakeups_left = 0;              // `rest N`: event-loop wakeups still to count
  int rest_wakeups = 0, rest_frames = 0;  // the last rest's wakeups, and the frames drawn in them
  int settle_frames = 0;     // frames to let pass after input before the next command
  std::array<int, 2> resize_to{0, 0};
  int resize_frames_left = 0;  // `resize`: frames left to reach resize_to
};

// The prompt as it goes into a request: line breaks as spaces, and no
// spaces around it (Shift+Enter breaks a line for the person, not the model).
std::string prompt_for_request(const std::string& prompt);
// Whether the prompt has nothing to make: a blank prompt is not generated.
bool prompt_is_blank(const std::string& prompt);

struct AppState {
  std::filesystem::path data_folder;  // settings, log, history
  AppSettings settings;
  ModelState model;
  CurrentShape current;
  GenerationState generation;
  LatencyDemoState latency;
  CandidateState candidates;
  FrameTimes frames;
  HistoryState history;
  ExportState export_status;
  AppLog log;
  ViewState view;
  LayoutState layout;
  // The settings have no timing of this machine yet: one is taken once a model
  // is loaded and nothing runs (a person's app; a script asks with `calibrate`).
  bool detail_calibration_due = false;
  bool script_mode = false;  // a script drives the app (and its errors fail the run)
  ScriptState script;
  bool quit = false;
};

// The prompt check the Generate panel shows: whole words only, the last
// one once something follows it or Generate was pressed with it.
PromptCheck shown_prompt_check(const AppState& state);

}  // namespace cubeforge::app
