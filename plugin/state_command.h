// `rdmanet state`: the operator's way out when DEL cannot finish an attachment (a record
// that no longer parses, names what this rdmanet refuses to touch, or describes a device
// that is gone for good). `list` shows every record and every file that cannot be read;
// `forget` drops a record file and the holds naming its attachment, undoing nothing, after
// printing what the record said (so what it describes can be undone by hand).
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace rdmanet::plugin {

// args: what follows "state" on the command line. Returns the exit code: 0 done, 1 failed,
// 2 usage.
int state_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace rdmanet::plugin
