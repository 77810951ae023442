// ACL's virtual memory (docs/ACL.md, "Virtual memory") over npurt's: the
// sequence torch_npu's expandable segments run (reserve, malloc physical,
// map, use, unmap, free), its enum values, and bad arguments as statuses.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "acl/acl.h"
#include "npurt/npurt_vmm.h"

namespace {

constexpr size_t kPage = size_t{2} << 20;

aclrtPhysicalMemProp deviceProp() {
  aclrtPhysicalMemProp prop{};
  prop.handleType = ACL_MEM_HANDLE_TYPE_NONE;
  prop.allocationType = ACL_MEM_ALLOCATION_TYPE_PINNED;
  prop.memAttr = ACL_HBM_MEM_HUGE;
  prop.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  return prop;
}

TEST(AclVmm, EnumValuesAreCanns) {
  EXPECT_EQ(ACL_HBM_MEM_HUGE1G, 10);
  EXPECT_EQ(ACL_MEM_LOCATION_TYPE_DEVICE, 1);
  EXPECT_EQ(ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED, 1);
}

TEST(AclVmm, ReserveMapUseUnmapRelease) {
  aclrtPhysicalMemProp prop = deviceProp();
  size_t granularity = 0;
  ASSERT_EQ(aclrtMemGetAllocationGranularity(&prop, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM,
                                             &granularity),
            ACL_SUCCESS);
  EXPECT_EQ(granularity, kPage);
  void* va = nullptr;
  ASSERT_EQ(aclrtReserveMemAddress(&va, 4 * kPage, 0, nullptr, 1), ACL_SUCCESS);  // torch_npu's flags
  aclrtDrvMemHandle pages[2] = {nullptr, nullptr};
  for (auto& h : pages) ASSERT_EQ(aclrtMallocPhysical(&h, kPage, &prop, 0), ACL_SUCCESS);
  char* p = static_cast<char*>(va);
  ASSERT_EQ(aclrtMapMem(p, kPage, 0, pages[0], 0), ACL_SUCCESS);
  ASSERT_EQ(aclrtMapMem(p + kPage, kPage, 0, pages[1], 0), ACL_SUCCESS);
  std::vector<unsigned char> host(2 * kPage, 9), back(2 * kPage, 0);
  ASSERT_EQ(aclrtMemcpy(p, 2 * kPage, host.data(), host.size(), ACL_MEMCPY_HOST_TO_DEVICE),
            ACL_SUCCESS);
  ASSERT_EQ(aclrtMemcpy(back.data(), back.size(), p, back.size(), ACL_MEMCPY_DEVICE_TO_HOST),
            ACL_SUCCESS);
  EXPECT_EQ(back, host);
  // Still mapped: the reservation cannot go.
  EXPECT_EQ(aclrtReleaseMemAddress(va), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_NE(std::string(aclGetRecentErrMsg()).find("still has mappings"), std::string::npos);
  EXPECT_EQ(aclrtUnmapMem(p + 4096), ACL_ERROR_INVALID_PARAM);  // not a mapping's start
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(aclrtUnmapMem(p + i * kPage), ACL_SUCCESS);
    ASSERT_EQ(aclrtFreePhysical(pages[i]), ACL_SUCCESS);
  }
  EXPECT_EQ(aclrtMemset(p, kPage, 0, 16), ACL_ERROR_RT_PARAM_INVALID);  // unmapped: like freed
  EXPECT_EQ(aclrtUnmapMem(p), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtReleaseMemAddress(va), ACL_SUCCESS);
  EXPECT_EQ(aclrtReleaseMemAddress(va), ACL_ERROR_INVALID_PARAM);
}

TEST(AclVmm, BadArgumentsAreStatusCodes) {
  aclrtPhysicalMemProp prop = deviceProp();
  aclrtDrvMemHandle h = nullptr;
  void* va = nullptr;
  EXPECT_EQ(aclrtMallocPhysical(&h, kPage, nullptr, 0), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtMallocPhysical(nullptr, kPage, &prop, 0), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtMallocPhysical(&h, kPage, &prop, 1), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtMallocPhysical(&h, kPage + 1, &prop, 0), ACL_ERROR_RT_PARAM_INVALID);
  aclrtPhysicalMemProp host = prop;
  host.location.type = ACL_MEM_LOCATION_TYPE_HOST;
  EXPECT_EQ(aclrtMallocPhysical(&h, kPage, &host, 0), ACL_ERROR_INVALID_PARAM);
  aclrtPhysicalMemProp far = prop;
  far.location.id = 77;
  EXPECT_EQ(aclrtMallocPhysical(&h, kPage, &far, 0), ACL_ERROR_RT_INVALID_DEVICEID);
  EXPECT_EQ(aclrtReserveMemAddress(&va, kPage, 0, nullptr, 5), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtReserveMemAddress(nullptr, kPage, 0, nullptr, 0), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclrtFreePhysical(nullptr), ACL_ERROR_RT_INVALID_HANDLE);
  ASSERT_EQ(aclrtReserveMemAddress(&va, kPage, 0, nullptr, 0), ACL_SUCCESS);
  EXPECT_EQ(aclrtMapMem(va, kPage, 0, reinterpret_cast<aclrtDrvMemHandle>(0x42), 0),
            ACL_ERROR_RT_INVALID_HANDLE);
  ASSERT_EQ(aclrtMallocPhysical(&h, kPage, &prop, 0), ACL_SUCCESS);
  EXPECT_EQ(aclrtMapMem(va, kPage, 0, h, 3), ACL_ERROR_INVALID_PARAM);
  ASSERT_EQ(aclrtMapMem(va, kPage, 0, h, 0), ACL_SUCCESS);
  EXPECT_EQ(aclrtMapMem(va, kPage, 0, h, 0), ACL_ERROR_RT_PARAM_INVALID);  // mapped already
  EXPECT_EQ(aclrtUnmapMem(va), ACL_SUCCESS);
  EXPECT_EQ(aclrtFreePhysical(h), ACL_SUCCESS);
  EXPECT_EQ(aclrtFreePhysical(h), ACL_ERROR_RT_INVALID_HANDLE);
  EXPECT_EQ(aclrtReleaseMemAddress(va), ACL_SUCCESS);
}

}  // namespace
