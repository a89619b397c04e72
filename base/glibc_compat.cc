// Linked into the node binaries only (rdmanet, rdmanet-ipam), which run on the
// host's glibc, not on the build machine's (Debian 12: glibc 2.36).
//
// The static libstdc++ and libgcc of GCC 12 were built against glibc 2.36, and
// two of their objects call functions that older glibcs do not have:
//   - arc4random (2.36): std::random_device, pulled in by the copy-on-write
//     strings that std::runtime_error and friends use;
//   - _dl_find_object (2.35): the exception unwinder, to find the .eh_frame of
//     the code that threw.
// With them, the binaries would refuse to start on Ubuntu 22.04 (glibc 2.35) or
// RHEL 9 (2.34). Defined here, the linker binds those calls to these, and the
// binaries need glibc 2.34 (tests/binary/elf_deps.sh checks it). Both are built on calls
// every glibc since 2.25 has. Hidden: they serve the binary's own runtime and do
// not interpose on the host glibc's.
#include <dlfcn.h>
#include <link.h>
#include <sys/random.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>

extern "C" {

// A random 32-bit value from the kernel, as glibc's own arc4random does.
__attribute__((visibility("hidden"))) uint32_t arc4random() noexcept {
  uint32_t value = 0;
  auto* at = reinterpret_cast<unsigned char*>(&value);
  size_t got = 0;
  while (got < sizeof value) {
    ssize_t n = getrandom(at + got, sizeof value - got, 0);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      abort();  // as glibc does: no randomness is not something to go on without
    }
    got += static_cast<size_t>(n);
  }
  return value;
}

#ifdef DLFO_STRUCT_HAS_EH_DBASE  // glibc 2.35+ headers: the unwinder calls _dl_find_object
namespace {

// ELF program headers give addresses as integers; dl_find_object wants pointers.
void* as_pointer(uintptr_t address) {
  return reinterpret_cast<void*>(address);  // NOLINT(performance-no-int-to-ptr)
}

struct Search {
  uintptr_t pc;
  dl_find_object* out;
};

// dl_iterate_phdr callback: 1 (stop) once the object whose PT_LOAD segments hold
// the address is found.
int find_object(dl_phdr_info* info, size_t /*size*/, void* data) {
  auto* search = static_cast<Search*>(data);
  uintptr_t low = UINTPTR_MAX;
  uintptr_t high = 0;
  uintptr_t eh_frame = 0;
  bool inside = false;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    uintptr_t start = info->dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_LOAD) {
      low = start < low ? start : low;
      high = start + ph.p_memsz > high ? start + ph.p_memsz : high;
      inside = inside || (search->pc >= start && search->pc < start + ph.p_memsz);
    } else if (ph.p_type == PT_GNU_EH_FRAME) {
      eh_frame = start;
    }
  }
  if (!inside) {
    return 0;
  }
  *search->out = dl_find_object{};
  search->out->dlfo_map_start = as_pointer(low);
  search->out->dlfo_map_end = as_pointer(high);
  search->out->dlfo_eh_frame = as_pointer(eh_frame);
  return 1;
}

}  // namespace

// What the unwinder asks: the mapping and the .eh_frame_hdr of the object that
// holds `address`. 0 when found, -1 otherwise (glibc's contract). The link map is
// left null: the unwinder does not read it.
__attribute__((visibility("hidden"))) int _dl_find_object(void* address,
                                                          dl_find_object* result) noexcept {
  Search search{reinterpret_cast<uintptr_t>(address), result};
  return dl_iterate_phdr(find_object, &search) == 1 ? 0 : -1;
}

#endif

}  // extern "C"
