// The orphans of one state directory: record file -> when the agent first saw its netns gone
// (Unix seconds), kept in <stateDir>/.agent/orphans.json so that a restart of the agent does
// not start the grace period anew, and a SIGKILL at any point costs nothing.
#pragma once

#include <map>
#include <set>
#include <string>

#include "base/error.h"

namespace rdmanet::agent {

class OrphanBook {
 public:
  // Reads the book of `state_dir`; an unreadable one starts afresh (logged).
  explicit OrphanBook(const std::string& state_dir);

  // When `key` was first seen orphaned (now, if this is the first time).
  long long first_seen(const std::string& key, long long now);
  void forget(const std::string& key);
  // Saves what this round saw (entries of records that are gone are dropped).
  Status save();

 private:
  std::string path_;
  std::map<std::string, long long> since_;
  std::set<std::string> seen_;
  bool changed_ = false;
};

}  // namespace rdmanet::agent
