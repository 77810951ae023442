/* The ACL headers compile as C99 and their functions link from C: a round
 * trip host -> device -> host on a stream of its own. Exit status 0 = pass. */
#include <stdio.h>
#include <string.h>

#include "acl/acl.h"

#define CHECK(call)                                                         \
  do {                                                                      \
    aclError status_ = (call);                                              \
    if (status_ != ACL_SUCCESS) {                                           \
      fprintf(stderr, "%s failed: %d (%s)\n", #call, status_,               \
              aclGetRecentErrMsg());                                        \
      return 1;                                                             \
    }                                                                       \
  } while (0)

int main(void) {
  enum { kCount = 256 };
  int in[kCount], out[kCount], i;
  void* dev = NULL;
  aclrtStream stream = NULL;
  aclrtStreamStatus status = ACL_STREAM_STATUS_RESERVED;
  for (i = 0; i < kCount; ++i) in[i] = i * 3;
  memset(out, 0, sizeof out);

  CHECK(aclInit(NULL));
  CHECK(aclrtSetDevice(0));
  CHECK(aclrtCreateStream(&stream));
  CHECK(aclrtMalloc(&dev, sizeof in, ACL_MEM_MALLOC_HUGE_FIRST));
  CHECK(aclrtMemcpyAsync(dev, sizeof in, in, sizeof in, ACL_MEMCPY_HOST_TO_DEVICE, stream));
  CHECK(aclrtMemcpyAsync(out, sizeof out, dev, sizeof in, ACL_MEMCPY_DEVICE_TO_HOST, stream));
  CHECK(aclrtSynchronizeStream(stream));
  CHECK(aclrtStreamQuery(stream, &status));
  if (status != ACL_STREAM_STATUS_COMPLETE || memcmp(in, out, sizeof in) != 0) {
    fprintf(stderr, "wrong result after aclrtSynchronizeStream\n");
    return 1;
  }
  if (aclrtDestroyStream((aclrtStream)0x1234) != ACL_ERROR_RT_INVALID_HANDLE) {
    fprintf(stderr, "a garbage stream was not ACL_ERROR_RT_INVALID_HANDLE\n");
    return 1;
  }
  CHECK(aclrtFree(dev));
  CHECK(aclrtDestroyStream(stream));
  CHECK(aclFinalize());
  printf("ACL C program: OK\n");
  return 0;
}
