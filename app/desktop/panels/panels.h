// The panels over the 3D view, one file each, all drawn from draw_panels()
// (panels.cpp) in that order. Each reads and edits the App's state and calls
// its actions; none keeps state of its own between frames.
//
// Layout (core/panel_layout.h): Generate with the settings on the left; Live
// statistics, History and Export on the right; the Log along the bottom; the
// viewport behind them all, the object framed in the free part between.
// Each panel opens with begin_panel(), which places it and keeps it inside
// the window.
#pragma once

#include <string>

#include <imgui.h>
#include <imgui_stdlib.h>  // InputText on std::string

#include "app/desktop/app.h"

namespace cubeforge::app {

const ImVec4 kErrorTextColour(1.f, 0.45f, 0.4f, 1.f);

void draw_generate_panel(App& app);    // generate_panel.cpp: prompt, run buttons, then the settings
void draw_settings(App& app);          // settings_panel.cpp: the settings sections inside Generate
void draw_statistics_panel(App& app);  // statistics_panel.cpp: progress, timings, frame times, latency demo
void draw_history_panel(App& app);     // history_panel.cpp
void draw_export_panel(App& app);      // export_panel.cpp: export, screenshot and view switches
void draw_log_panel(App& app);         // log_panel.cpp: the log, and the error popup
void draw_error_popup(App& app);
void draw_candidates_panel(App& app);  // candidates_panel.cpp: several seeds side by side
void draw_latency_panel(App& app);     // latency_panel.cpp: the latency demo's own view

// ImGui::Begin for a panel at its layout place (when the layout says so) and
// inside the window; End() as usual.
bool begin_panel(App& app, Panel panel, ImGuiWindowFlags flags = 0);
// Records the last item's rectangle under `name` (script `click NAME`).
void remember_item(App& app, const std::string& name);
// The named item just drawn is greyed out for `reason` (empty: it is not).
void remember_refusal(App& app, const std::string& name, const std::string& reason);
// Records a text the panel shows under `name` (script `dump`).
void remember_text(App& app, const std::string& name, const std::string& text);

// Puts the next item on the same line when `width` more still fits the
// panel, else on the next: rows of buttons that wrap instead of being cut off.
void flow_next(float width);
float button_width(const char* label);
float checkbox_width(const char* label);

// A thumbnail mosaic as `size` pixels square at `origin`: one rectangle per
// run of equal cells in a row (the background is one colour per row).
void draw_mosaic(const ThumbnailMosaic& mosaic, ImVec2 origin, float size);

// Tooltip on the last item, shown even when it is disabled (the reason it is),
// wrapped to a readable width.
void reason_tooltip(const std::string& text);

}  // namespace cubeforge::app
