// The node agent's metrics: the Prometheus text exposition (format 0.0.4) of the last round
// and of the totals since the agent started, one table of metric families (name, type, help,
// samples) in metrics.cc.
#pragma once

#include <string>

#include "agent/round.h"

namespace rdmanet::agent {

std::string exposition(const RoundReport& last, const Totals& totals);

}  // namespace rdmanet::agent
