// One internal model of a CNI result, encoded for and decoded from every
// supported spec version (0.3.0 .. 1.1.0).
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"

namespace rdmanet::cni {

struct Interface {
  std::string name;
  std::string mac;
  int mtu = 0;  // 1.1.0 only; 0 = not reported
  std::string sandbox;
  std::string socket_path;  // 1.1.0 only
  std::string pci_id;       // 1.1.0 only
  bool operator==(const Interface&) const = default;
};

struct IpConfig {
  std::string address;           // CIDR: "10.1.2.3/24", "fd00::3/64"
  std::string gateway;           // may be empty
  std::optional<int> interface;  // index into Result::interfaces
  bool is_ipv6() const;
  bool operator==(const IpConfig&) const = default;
};

struct Route {
  std::string dst;  // CIDR
  std::string gw;   // may be empty
  // 1.1.0 only; 0 / nullopt = not set.
  int mtu = 0;
  int advmss = 0;
  int priority = 0;
  std::optional<int> table;
  std::optional<int> scope;
  bool operator==(const Route&) const = default;
};

struct Dns {
  std::vector<std::string> nameservers;
  std::string domain;
  std::vector<std::string> search;
  std::vector<std::string> options;
  bool empty() const;
  bool operator==(const Dns&) const = default;
};

struct Result {
  std::vector<Interface> interfaces;
  std::vector<IpConfig> ips;
  std::vector<Route> routes;
  Dns dns;
  bool operator==(const Result&) const = default;
};

// Encodes for `version` (one of kSupportedVersions).
nlohmann::json encode_result(const Result& result, const std::string& version);
std::string encode_result_string(const Result& result, const std::string& version);

// Decodes a result of `version` (prevResult, or a delegated plugin's output).
// `where` names the document in errors ("prevResult", "IPAM result").
Expected<Result> decode_result(const nlohmann::json& doc, const std::string& version,
                               const std::string& where);

Expected<Dns> decode_dns(const nlohmann::json& doc, const std::string& where);

// Validates an address with prefix ("10.1.2.3/24"); returns false for garbage.
bool is_valid_cidr(const std::string& text);
bool is_valid_ip(const std::string& text);

}  // namespace rdmanet::cni
