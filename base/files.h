// Files: read whole, replaced atomically (readers see the old or the new content, also
// across a crash: the state store and the device-info file are written this way), and the
// private directories whose contents rdmanet trusts.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace rdmanet {

// Creates `path` and its missing parents with `mode`; directories that exist
// are left as they are. A component that exists but is not a directory is an
// I/O error naming it.
Status make_directories(const std::string& path, mode_t mode);

// Refuses (kIo, naming the path) a directory that others could plant files
// in: not a directory (a symlink counts as not), not owned by this process's
// user, or writable by group or others. For the directories whose files
// rdmanet trusts on DEL (state, IPAM store).
Status check_private_directory(const std::string& path);
// The same for what a stat of `path` (an open directory's fstat, say) returned.
Status check_private_directory(const struct stat& st, const std::string& path);

// Writes all of `data` to `fd`, going on after short writes and EINTR; returns 0, or the
// errno of the write that failed. With an `offset`, writes there (pwrite: the file position
// stays where it was).
int write_all(int fd, std::string_view data, std::optional<off_t> offset = std::nullopt);

// What a write must survive. A crash of the process leaves the page cache, so a file
// written and renamed into place is there whole afterwards; a crash of the machine (power,
// panic) keeps only what was synced. Each file's writer says which it needs: most state
// describes namespaces and links that a reboot takes away anyway (README "Durability").
enum class Survives {
  kProcessCrash,  // write + rename: no sync
  kMachineCrash,  // write + fsync + rename + fsync of the directory
};

// Replaces `path` with `data`: writes "<path>.tmp" beside it with exactly `mode`, moves it
// into place (move_into_place), and, for Survives::kMachineCrash, fsyncs the file before
// the move and the directory after it (best effort). The directory must exist. On failure the old
// file, if any, is left as it was and the temporary file is removed. Not for concurrent writers of
// one path: they share the temporary name.
Status write_file_atomically(const std::string& path, const std::string& data, mode_t mode,
                             Survives survives);

// Puts the complete file `tmp` of directory `dir_fd` at `name`, atomically for readers, and
// returns 0 or the errno of the rename. A regular file already at `name` is replaced by
// exchanging the two names (renameat2 RENAME_EXCHANGE) and removing the old content, now
// under `tmp` (one a crash leaves there is removed with the next write): a plain rename
// over an existing file makes ext4 (auto_da_alloc) start writing the new file out within
// the call, which then waits behind whatever else writes to the disk, tens to hundreds of
// milliseconds on a busy node, for a durability only a machine crash would need. Anything
// else at `name` (nothing, a link, a directory) gets a plain rename, which never follows it.
int move_into_place(int dir_fd, const std::string& tmp, const std::string& name);

// Whether a file whose content does not parse is what a machine crash leaves of a write
// that was never synced (a name whose data never reached the disk: empty, zeroes or cut
// short): true when it was last changed before this boot. Within one boot a write that
// renames a complete temporary into place is never seen half done, so an unreadable file
// changed since the boot is something else, and stays an error.
bool changed_before_this_boot(const std::string& path);

// Why read_file_at refuses a file that is there.
enum class Refusal {
  kNotRegular,  // a symlink (never followed), a directory, a FIFO (never blocked on), a socket
  kNotOwn,      // ReadOptions::only_own: another user's file, or one with another link
  kTooLarge,    // more than ReadOptions::max_size bytes
};

// What read_file_at accepts, and how it words a refusal.
struct ReadOptions {
  size_t max_size = 16 << 20;
  // Only a file this process's user owns and that has no other link (no hard link to a file
  // elsewhere): for trees others can write in (Dir::read_own).
  bool only_own = false;
  // The error for a refused file, given what it is (type, owner, links); unset: kIo, "read
  // <what>: not a regular file (a FIFO)", "...: not a file rdmanet wrote (owner uid 0, 2
  // links)", "...: larger than <max_size> bytes".
  Error (*refused)(const std::string& what, Refusal why, const struct stat& st) = nullptr;
};

// The whole content of the regular file `name` in the directory `dir_fd` (AT_FDCWD: `name`
// is a path), read to its end whatever its size says (procfs and sysfs report 0 or 4096);
// std::nullopt when there is none. One open, one fstat, reads until EOF. Errors name `what`
// (kIo for a failed call; refusals as ReadOptions::refused says).
Expected<std::optional<std::string>> read_file_at(int dir_fd, const std::string& name,
                                                  const std::string& what,
                                                  const ReadOptions& options = {});

// read_file_at(AT_FDCWD, path, path): the whole content of a regular file, std::nullopt when
// it does not exist; a symlink in the last component, a FIFO or more than `max_size` bytes
// is refused (kIo, naming the path): what rdmanet reads it wrote itself.
Expected<std::optional<std::string>> read_file(const std::string& path, size_t max_size = 16 << 20);

// What a file that is not a regular one is, for errors naming it: "a directory", "a symlink",
// "a FIFO", "a special file".
const char* file_type_name(mode_t mode);

// The names in a directory, without "." and "..", in no particular order. A directory
// that is not there has none; other failures are kIo naming `what`.
Expected<std::vector<std::string>> directory_entries(const std::string& dir);
// The same for an open directory (read from its start; `dir_fd` stays open).
Expected<std::vector<std::string>> directory_entries(int dir_fd, const std::string& what);

// Refuses (kind, naming `what`) a path that is not absolute, holds a NUL byte or climbs
// with a ".." component: for the paths rdmanet is told to write or remove under.
Status check_absolute_path(const std::string& path, const std::string& what, ErrorKind kind);

// The directory part of a path: "/a/b" -> "/a", "/a" -> "/", "a" -> ".".
std::string parent_of(const std::string& path);

}  // namespace rdmanet
