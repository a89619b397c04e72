// Where attachment records live, under the state directory:
//   <stateDir>/<network>/<containerID>.<hex(ifname)>.json   one attachment (plugin/record.h)
//   <stateDir>/holds/<device key>                            which attachment holds a device
//   <stateDir>/locks/<device key>.lock                       flock per device
//   <stateDir>/.agent/                                       the node agent's own (node_agent.h)
// Files are 0600 in 0700 directories, written atomically (temp file, rename) but not synced:
// they must survive a crash of the process, which leaves the page cache, not one of the
// machine, which also takes every pod netns and puts every device back in the host (README
// "Durability"). A file such a crash left without its content (changed before this boot,
// unparseable) reads as absent. Names are built only from validated values (network name and
// container id match [a-zA-Z0-9][a-zA-Z0-9_.-]*, bounded in length) and hex encodings, so no input
// can point a path outside the state dir.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/file_lock.h"
#include "plugin/record.h"

namespace rdmanet::plugin {

class StateStore {
 public:
  explicit StateStore(std::string root) : root_(std::move(root)) {}

  const std::string& root() const { return root_; }

  // Blocks until this process holds the lock `key` (a device key, "pf-...", "rdma-netns").
  Expected<FileLock> lock(const std::string& key);

  // The record of `id`, if any. A state directory that is not private, or a file that is
  // not the record of `id`, is kState (107) naming it.
  Expected<std::optional<AttachmentRecord>> load(const AttachmentId& id) const;
  Status save(const AttachmentRecord& record);
  // Removes whatever is on disk of an attachment, also the temporary of a write that was
  // killed before the first record landed (nothing on the node changed before that).
  Status forget(const AttachmentId& id);

  // The attachment a device's hold file names, if any.
  Expected<std::optional<AttachmentId>> holder(const std::string& key) const;
  Status set_holder(const std::string& key, const AttachmentId& id);
  // Removes the hold if it names `id`; someone else's hold is left alone.
  Status clear_holder(const std::string& key, const AttachmentId& id);

  // Every attachment of a network (for GC and the operator's listing), and each file that
  // could not be read, trusted or parsed, with why.
  struct Unreadable {
    std::string path;
    Error error;
  };
  struct Listing {
    std::vector<AttachmentRecord> records;
    std::vector<Unreadable> unreadable;
  };
  Expected<Listing> list(const std::string& network) const;
  // The same over every network directory (for `rdmanet state list`).
  Expected<Listing> list_all() const;
  // The file of an attachment's record.
  std::string path_of(const AttachmentId& id) const { return attachment_path(id); }

  // For the operator, when DEL cannot go on (`rdmanet state forget`): removes the record
  // file `path` (a .json file in a network directory of this store, readable or not) and
  // every hold naming its attachment, undoing nothing. Returns the hold keys removed.
  Expected<std::vector<std::string>> forget_file(const std::string& path);

  // The directory holds state: writable, creatable (for STATUS).
  Status check_writable();

 private:
  std::string attachment_path(const AttachmentId& id) const;
  Status list_into(const std::string& dir, Listing* out) const;
  std::string root_;
};

}  // namespace rdmanet::plugin
