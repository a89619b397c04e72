// Helpers for ipam tests: a temporary directory removed even when a test
// fails, a runner for the rdmanet-ipam binary, and cluster-mode configs.
#pragma once

#include <nlohmann/json.hpp>

#include "base/testing/process.h"
#include "base/testing/temp_dir.h"
#include "ipam/ip.h"

namespace rdmanet::ipam::testing {

using rdmanet::testutil::finish;
using rdmanet::testutil::Outcome;
using rdmanet::testutil::run;
using rdmanet::testutil::spawn;
using rdmanet::testutil::TempDir;

// An address the test writes as text (and knows to be valid).
inline IpAddr ip(const char* text) { return *parse_ip(text); }

// An ipam section with `ranges` and the `cluster` object.
inline nlohmann::json ipam_with(const nlohmann::json& cluster, const nlohmann::json& ranges) {
  return {{"type", "rdmanet-ipam"}, {"ranges", ranges}, {"cluster", cluster}};
}

// A cluster object: blockSize 26 and one etcd endpoint, with `extra` on top.
inline nlohmann::json cluster_conf(const nlohmann::json& extra = nlohmann::json::object()) {
  nlohmann::json c = {{"blockSize", 26}, {"etcd", {{"endpoints", {"https://10.0.0.1:2379"}}}}};
  c.update(extra);
  return c;
}

}  // namespace rdmanet::ipam::testing
