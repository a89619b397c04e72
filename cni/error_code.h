// The one place where error kinds become CNI error codes (spec: 1-99 are the spec's own,
// 100+ the plugin's; see the ErrorKind comments in base/error.h), and where a caller asks
// what a code from another plugin means: by name, never by number.
#pragma once

#include "base/error.h"

namespace rdmanet::cni {

// The spec's well-known error codes ("Error" in the CNI spec), named as it names them.
namespace code {
constexpr int kIncompatibleCniVersion = 1;
constexpr int kUnsupportedField = 2;             // in the network configuration
constexpr int kUnknownContainer = 3;             // the container is unknown or does not exist
constexpr int kInvalidEnvironmentVariables = 4;  // CNI_COMMAND, CNI_CONTAINERID, ...
constexpr int kIoFailure = 5;
constexpr int kDecodingFailure = 6;
constexpr int kInvalidNetworkConfig = 7;
constexpr int kTryAgainLater = 11;
constexpr int kNotAvailable = 50;         // the plugin cannot serve ADD now
constexpr int kLimitedConnectivity = 51;  // ... and attached containers may be cut off too
}  // namespace code

int error_code(const Error& error);

// A plugin older than spec 1.1 answers STATUS with an unknown version (1) or, libcni's skel,
// an unknown CNI_COMMAND (4): that says nothing about whether it can allocate.
bool predates_status(const Error& error);
// A plugin older than spec 1.1 answers GC with an unknown version (1) or, libcni's skel before
// 1.1, that a variable its other commands need is missing: CNI_CONTAINERID (3) or another (4).
bool predates_gc(const Error& error);
// The plugin refuses the call itself, whatever it holds: the version (1), a field (2), the
// environment (4), a config it cannot decode (6) or finds invalid (7). It holds nothing for it.
bool rejects_the_config(const Error& error);

}  // namespace rdmanet::cni
