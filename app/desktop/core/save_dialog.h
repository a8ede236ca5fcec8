// The desktop's own "Save as" dialog, run as a child process so the window
// keeps drawing while it is open: zenity (GTK's file chooser; Debian package
// `zenity`, which goes through the XDG desktop portal inside a sandbox) or
// kdialog (KDE's), whichever is installed. A child process instead of a
// library keeps GTK or Qt out of the app's own process and its Vulkan main
// loop, and needs nothing at build time. Neither is required: without one,
// the Export panel's folder and name fields are the way, and the button
// says why it is unavailable.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

namespace cubeforge::app {

class SaveDialog {
 public:
  // Empty when a dialog program was found, else why there is none.
  static std::string unavailable_reason();

  // Opens the dialog on `suggested`; false while one is open or when there is none.
  bool start(const std::filesystem::path& suggested);
  bool is_open() const;
  // Once the dialog has closed: the path chosen, or "" when it was cancelled;
  // empty while it is open or after the result was taken.
  std::optional<std::string> take_result();

 private:
  struct Shared;
  std::shared_ptr<Shared> shared_;  // shared with the thread that waits for the child
};

}  // namespace cubeforge::app
