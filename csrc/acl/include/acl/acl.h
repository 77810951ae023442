/*
 * ACL-compatible API of the simulated NPU: the umbrella header, as ACL's
 * acl/acl.h. Initialisation and finalisation are bookkeeping here (the
 * runtime starts on first use), kept so that ACL programs run unchanged.
 */
#ifndef ACL_ACL_H_
#define ACL_ACL_H_

#include "acl/acl_base.h"
#include "acl/acl_rt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Version of the ACL API this layer follows (CANN 8.x numbering). */
#define ACL_MAJOR_VERSION 8
#define ACL_MINOR_VERSION 0
#define ACL_PATCH_VERSION 0

/* Initialises ACL for the process. configPath may be NULL or name a
 * readable file (its content is not used: ACL_ERROR_INVALID_FILE if it cannot
 * be read). A second call without aclFinalize: ACL_ERROR_REPEAT_INITIALIZE.
 * Other functions do not require it (torch_npu initialises ACL itself). */
ACL_FUNC_VISIBILITY aclError aclInit(const char* configPath);
/* Ends what aclInit began; ACL_ERROR_REPEAT_FINALIZE if not initialised.
 * Streams, events and memory stay valid. */
ACL_FUNC_VISIBILITY aclError aclFinalize(void);
/* [out] the ACL version above. */
ACL_FUNC_VISIBILITY aclError aclrtGetVersion(int32_t* majorVersion, int32_t* minorVersion,
                                             int32_t* patchVersion);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ACL_ACL_H_ */
