// torch_npu's mstx markers and ranges (MindStudio Tools Extension, Ascend's
// NVTX: torch_npu.npu.mstx) on the simulated device.
//
// Layer: profiler (above core and npurt).
//
// Note [Markers on the simulator]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// On Ascend, mstx hands markers to msprof, which shows them beside the
// device's work. Here they reach torch.profiler, the profiler this backend
// feeds:
//  - on the host, a mark is a zero-length user annotation (a USER_SCOPE
//    RecordFunction, what torch.profiler.record_function makes) and a range
//    one that lasts from its start to its end (or push to pop); without a
//    profile collecting, each costs RecordFunction's check of its callbacks;
//  - given a stream, the mark or range is also placed in the stream's work:
//    a task named "mstx: <message>" (a range: "... (start)" and "... (end)")
//    that does nothing when it runs, so the profile's row of that stream
//    shows where the stream was when the program got there.
// The message of a domain other than "default" is shown as "<domain>:
// <message>". Range ids are process-unique and > 0; ending an unknown id does
// nothing (mstx's rule), so a range ends once. Push/pop ranges nest per
// thread and domain: push returns the depth of the new range (0 for the
// outermost), pop the depth of the range it ended, or -1 when none is open.
//
// Thread safety: every function is thread-safe; a range may end on another
// thread than the one that started it.
#pragma once

#include <c10/macros/Export.h>

#include <cstdint>
#include <string>

#include "core/NPUStream.h"

// The library hides its symbols; these are what _C calls.
namespace c10_npu::mstx {

// A mark on the host, and on `stream` if given.
C10_EXPORT void mark(const std::string& message, const NPUStream* stream,
                     const std::string& domain);
// Starts a range (on the host, and on `stream` if given); returns its id.
C10_EXPORT uint64_t rangeStart(const std::string& message, const NPUStream* stream,
                               const std::string& domain);
// Ends the range `id` started (and marks its end on the stream it named).
C10_EXPORT void rangeEnd(uint64_t id, const std::string& domain);
// Opens a nested range of this thread and `domain`; returns its depth.
C10_EXPORT int rangePush(const std::string& message, const NPUStream* stream,
                         const std::string& domain);
// Closes the innermost range this thread pushed in `domain`; its depth, or -1.
C10_EXPORT int rangePop(const std::string& domain);

}  // namespace c10_npu::mstx
