#pragma once
// Atomic writes: a file the user had is replaced whole or not at all. Every writer of reports,
// checkpoints, traces and datasets goes through here: write `<path>.tmp.<pid>` in the same folder,
// then rename it onto `path` (atomic on POSIX within one file system); on any failure the temp
// file is removed and the old `path` is untouched.

#include <filesystem>
#include <string_view>

namespace ddph::common {

/// "<path>.tmp.<pid>": where a writer puts the new content before committing it.
std::filesystem::path tempPathFor(const std::filesystem::path& path);

/// Renames `temp` onto `path`; on failure removes `temp` and throws Error naming `path`.
void commitTempFile(const std::filesystem::path& temp, const std::filesystem::path& path);

/// Writes `content` to tempPathFor(path) and commits it. Throws ConfigError when the folder
/// cannot be written to, Error for the rest; both name `path`.
void writeFileAtomically(const std::filesystem::path& path, std::string_view content);

/// Checked before a long run, so that it does not end in a file it cannot write: throws
/// ConfigError (one line naming `what` and `path`, "cannot write the JSON report to 'r.json': no
/// folder 'out'") unless writeFileAtomically(path) could make its file now: `path` is not a
/// folder, its folder exists and a file can be created in it (tried: a probe file made and
/// removed, so read-only file systems and root's own limits count, not just permission bits).
void checkWritableFile(const std::filesystem::path& path, std::string_view what);

/// The same for a folder a run writes into: `dir` is a folder (or can be created: its nearest
/// existing ancestor is a folder) and a file can be created in that folder.
void checkWritableFolder(const std::filesystem::path& dir, std::string_view what);

}  // namespace ddph::common
