// Helpers for ipam tests: a temporary directory removed even when a test
// fails, and a runner for the rdmanet-ipam binary.
#pragma once

#include "base/testing/process.h"
#include "base/testing/temp_dir.h"

namespace rdmanet::ipam::testing {

using rdmanet::testutil::finish;
using rdmanet::testutil::Outcome;
using rdmanet::testutil::run;
using rdmanet::testutil::spawn;
using rdmanet::testutil::TempDir;

}  // namespace rdmanet::ipam::testing
