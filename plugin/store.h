// Where attachment records live, under the state directory:
//   <stateDir>/<network>/<containerID>.<hex(ifname)>.json   one attachment (plugin/record.h)
//   <stateDir>/holds/<device key>                            which attachment holds a device
//   <stateDir>/locks/<device key>.lock                       flock per device
// Files are 0600 in 0700 directories, written atomically (temp file, fsync, rename, fsync of
// the directory). Names are built only from validated values (network name and container id
// match [a-zA-Z0-9][a-zA-Z0-9_.-]*, bounded in length) and hex encodings, so no input can
// point a path outside the state dir.
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

  // Every attachment of a network (for GC). Files that cannot be read are skipped.
  Expected<std::vector<AttachmentRecord>> list(const std::string& network) const;

  // The directory holds state: writable, creatable (for STATUS).
  Status check_writable();

 private:
  std::string attachment_path(const AttachmentId& id) const;
  std::string root_;
};

}  // namespace rdmanet::plugin
