// Status names, descriptions and the thread-local "last error" message.
//
// Every failing entry point stores "<function>: <detail>" here before it
// returns; npuGetLastErrorMessage() hands the stored text back on the same
// thread. Successful calls leave the message alone (the C API promises the
// message of the most recent *failing* call), so the hot path never touches
// thread-local storage.
//
// Thread safety: every function here is thread-safe; the message is
// thread_local, the tables are immutable.
//
// Note [Last error storage] in errors.cpp says why the message lives in a
// fixed buffer.
#pragma once

#include <cstddef>
#include <cstring>
#include <string_view>

#include "npurt/npurt.h"

namespace npurt::internal {

// The integer inside a C enum parameter. C callers (and ctypes) may pass any
// int in an enum parameter; in C++ loading an enum object whose value is
// outside the enumeration's range is undefined (UBSan flags it), so entry
// points read such parameters through their bytes and validate the int.
template <typename Enum>
int rawEnumValue(const Enum& value) noexcept {
  static_assert(sizeof(Enum) == sizeof(int), "C enums are int-sized on supported ABIs");
  int raw = 0;
  std::memcpy(&raw, &value, sizeof raw);
  return raw;
}

// "npuErrorInvalidValue", ...; "npuErrorUnrecognized" for unknown values.
const char* errorName(const npuError_t& error) noexcept;

// One sentence describing the status; never null.
const char* errorString(const npuError_t& error) noexcept;

// Bytes of the calling thread's last-error buffer, NUL included; longer
// messages are truncated. Room for a task's whole error buffer
// (Executor::kErrorBufSize) plus the failure rule's prefix.
constexpr size_t kLastErrorCapacity = 2048;

// Stores "<function>: <detail>" as the calling thread's last error message
// and returns `code`, so call sites read `return fail(code, fn, "...")`.
// Never throws and never allocates (see Note [Last error storage] in
// errors.cpp); safe to call at any point of process or thread exit.
npuError_t fail(npuError_t code, std::string_view function, std::string_view detail) noexcept;

// The calling thread's last error message, "" if none. Valid until the next
// failing call on this thread.
const char* lastErrorMessage() noexcept;

}  // namespace npurt::internal
