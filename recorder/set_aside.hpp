// Setting an old capture aside for `overwrite: true` until the new one has shown it works.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace sluice::recorder {

// `overwrite: true` never deletes the old capture before the new one has shown it works: the
// old lane's files are renamed into DIR/NAME-LANE.sluice-replaced/ (same file system) at
// open, moved back if the new recording fails before a chunk was journaled, and removed
// once it finished cleanly. A kill in between leaves the set-aside directory, which
// find_replaced() finds (validation refuses to start over it; `sluice capture repair`
// reports it) and swap_replaced() restores.

inline constexpr std::string_view kReplacedSuffix = ".sluice-replaced";
std::string replaced_directory(const std::string& directory, const std::string& name, const std::string& lane);
// Every set-aside directory of capture `name` in `directories` (NAME-*.sluice-replaced).
std::vector<std::string> find_replaced(const std::vector<std::string>& directories, const std::string& name);
// Swaps the files in `replaced` with the lane's current files beside it (renames only, so
// nothing is lost and a second swap undoes the first). Returns how many files came back.
std::size_t swap_replaced(const std::string& replaced);

// One lane's earlier files, set aside while its new recording runs.
class SetAside {
 public:
  SetAside(std::vector<std::string> directories, std::string name, std::string lane);

  // Sets the lane's existing files aside when `overwrite`, else refuses when there are any.
  // Throws naming the cause, with whatever it had set aside put back.
  void take(bool overwrite);
  // The new recording is dropped (its files removed), the set-aside files come back, the
  // collection is rewritten. Logs what it cannot do.
  void restore() noexcept;
  // The end of the recording: drops the set-aside files after a clean finish, else restores
  // them (nothing journaled) or keeps them. Returns what to add to the recording's error
  // ("" when nothing).
  std::string settle(bool journaled, bool failed) noexcept;

 private:
  std::vector<std::string> directories_;
  std::string name_;
  std::string lane_;
  std::vector<std::string> taken_;  // NAME-LANE.sluice-replaced directories made here
};

}  // namespace sluice::recorder
