// Shared helpers of the ACL layer: status mapping, the thread's last error
// message, and the default ACL stream. Private to csrc/acl.
#pragma once

#include <cstring>
#include <exception>
#include <new>
#include <string>

#include "acl/acl_base.h"
#include "npurt/npurt.h"

namespace acl {

// The integer inside a C enum parameter. C callers (and ctypes) may pass any
// int; in C++ loading an enum object outside the enumeration's range is
// undefined (UBSan flags it), so entry points validate the int they read
// through the parameter's bytes. Thread-safe.
template <typename Enum>
int rawEnum(const Enum& value) noexcept {
  static_assert(sizeof(Enum) == sizeof(int), "C enums are int-sized on supported ABIs");
  int raw = 0;
  std::memcpy(&raw, &value, sizeof raw);
  return raw;
}

// Maps an npurt status to ACL's (table in docs/ACL.md, "Status codes").
// Thread-safe.
aclError fromNpu(npuError_t status);

// Records `message` as the calling thread's last error and returns `status`.
// Thread-local.
aclError fail(aclError status, const std::string& message);

// Maps an npurt status; a failure keeps npurt's message (prefixed by the ACL
// function's name) as the thread's last error. Thread-local.
aclError check(npuError_t status, const char* function);

// Clears the thread's last error at the start of a call. Thread-local.
void clearError();

// The npurt stream an aclrtStream names: the value itself, or for NULL the
// current device's default ACL stream (created on first use; Note [The
// default ACL stream]). Thread-safe.
aclError resolveStream(aclrtStream stream, npuStream_t* out, const char* function);

// Runs an entry point's body, turning an escaping exception into a status
// (the C boundary never throws).
template <typename F>
aclError guarded(const char* function, F&& body) noexcept {
  try {
    clearError();
    return body();
  } catch (const std::bad_alloc&) {
    return fail(ACL_ERROR_BAD_ALLOC, std::string(function) + ": out of host memory");
  } catch (const std::exception& e) {
    return fail(ACL_ERROR_INTERNAL_ERROR, std::string(function) + ": " + e.what());
  } catch (...) {
    return fail(ACL_ERROR_INTERNAL_ERROR, std::string(function) + ": unknown exception");
  }
}

}  // namespace acl
