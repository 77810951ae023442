// Error checking for the framework layer (c10_npu).
//
// Three kinds of failure, three tools (see ../shared/STYLE.md):
//  - an npurt status → NPU_CHECK(expr): evaluates expr once and throws a
//    c10::Error naming the status and the runtime's detailed message;
//  - a caller error → TORCH_CHECK worded "Expected X, but got Y";
//  - a broken invariant → TORCH_INTERNAL_ASSERT with a hint.
// Every message thrown from this layer carries torch_npu's style of suffix,
// NPU_ERROR_SUFFIX, so torch_npu-style regexes that match a prefix still match.
#pragma once

#include <c10/util/Exception.h>

#include <string>

#include "npurt/npurt.h"

namespace c10_npu {

// Suffix appended to framework error messages: the error class, as torch_npu
// does with its "ERRxxxxx PTA" codes. Kept short and constant.
#define NPU_ERROR_SUFFIX " [npu-sim error]"

// Builds "<expr> failed: <npuErrorName>: <detail>" for a failing npurt call.
std::string formatRuntimeError(const char* expr, npuError_t status);

}  // namespace c10_npu

// Throws c10::Error if the npurt call does not return npuSuccess.
// Thread-safe (uses the calling thread's last-error message).
#define NPU_CHECK(EXPR)                                                           \
  do {                                                                            \
    const npuError_t npu_check_status_ = (EXPR);                                  \
    if (C10_UNLIKELY(npu_check_status_ != npuSuccess)) {                          \
      TORCH_CHECK(false, ::c10_npu::formatRuntimeError(#EXPR, npu_check_status_), \
                  NPU_ERROR_SUFFIX);                                              \
    }                                                                             \
  } while (0)
