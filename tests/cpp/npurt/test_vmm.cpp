// Covers virtual memory (npurt_vmm.h, Note [Virtual memory]): the
// granularity, reserve/free, physical memory counted against the capacity
// (64 MB child process), map/unmap with copies, memsets and kernels over
// mapped memory (also across two adjacent mappings), contents surviving an
// unmap and a map elsewhere, unmapped memory rejected like freed memory, a
// queued copy keeping an unmapped range alive (and not unmapping a newer
// mapping), release while mapped, the race detector over mapped memory, and
// every bad input.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "npurt/npurt_vmm.h"
#include "test_util.h"

namespace npurt_test {
namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kGran = 2 * kMiB;

npuMemAllocationProp deviceProp(int device = 0) {
  npuMemAllocationProp prop{};
  prop.type = npuMemAllocationTypePinned;
  prop.location.type = npuMemLocationTypeDevice;
  prop.location.id = device;
  return prop;
}

size_t freeMemory() {
  size_t free = 0, total = 0;
  EXPECT_NPU_OK(npuMemGetInfo(&free, &total));
  return free;
}

// A reservation with physical memory mapped into it, all given back at
// scope exit (in the order the API wants).
class VmmTest : public NpurtTest {
 protected:
  void TearDown() override {
    (void)npuDeviceSynchronize();
    for (auto& [p, size] : mapped_) (void)npuMemUnmap(p, size);
    for (auto h : handles_) (void)npuMemRelease(h);
    for (auto& [p, size] : reserved_) (void)npuMemAddressFree(p, size);
    NpurtTest::TearDown();
  }
  char* reserve(size_t size) {
    void* p = nullptr;
    EXPECT_NPU_OK(npuMemAddressReserve(&p, size, 0, nullptr, 0));
    if (p != nullptr) reserved_.emplace_back(p, size);
    return static_cast<char*>(p);
  }
  npuMemGenericAllocationHandle_t create(size_t size) {
    npuMemGenericAllocationHandle_t h = nullptr;
    const npuMemAllocationProp prop = deviceProp();
    EXPECT_NPU_OK(npuMemCreate(&h, size, &prop, 0));
    if (h != nullptr) handles_.push_back(h);
    return h;
  }
  void map(char* p, size_t size, npuMemGenericAllocationHandle_t h, size_t offset = 0) {
    ASSERT_NPU_OK(npuMemMap(p, size, offset, h, 0));
    mapped_.emplace_back(p, size);
  }
  void unmap(char* p, size_t size) {
    ASSERT_NPU_OK(npuMemUnmap(p, size));
    for (auto it = mapped_.begin(); it != mapped_.end(); ++it) {
      if (it->first == p) {
        mapped_.erase(it);
        break;
      }
    }
  }
  std::vector<std::pair<void*, size_t>> reserved_;
  std::vector<std::pair<void*, size_t>> mapped_;
  std::vector<npuMemGenericAllocationHandle_t> handles_;
};

TEST_F(VmmTest, GranularityIsTwoMiB) {
  size_t g = 0;
  const npuMemAllocationProp prop = deviceProp();
  ASSERT_NPU_OK(npuMemGetAllocationGranularity(&g, &prop, npuMemAllocationGranularityMinimum));
  EXPECT_EQ(g, kGran);
  ASSERT_NPU_OK(npuMemGetAllocationGranularity(&g, &prop, npuMemAllocationGranularityRecommended));
  EXPECT_EQ(g, kGran);
}

TEST_F(VmmTest, ReservationIsAlignedAndHoldsNoMemory) {
  const size_t before = freeMemory();
  char* p = reserve(64 * kGran);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kGran, 0u);
  EXPECT_EQ(freeMemory(), before);
  // Not device memory until something is mapped there.
  std::vector<char> host(16);
  EXPECT_NPU(npuErrorInvalidDevicePointer,
             npuMemcpy(host.data(), p, host.size(), npuMemcpyDeviceToHost));
  void* q = nullptr;
  ASSERT_NPU_OK(npuMemAddressReserve(&q, 4 * kGran, 8 * kGran, nullptr, 0));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(q) % (8 * kGran), 0u);
  EXPECT_NPU_OK(npuMemAddressFree(q, 4 * kGran));
}

TEST_F(VmmTest, PhysicalMemoryCountsAgainstCapacityUntilLastUnmap) {
  const size_t before = freeMemory();
  char* p = reserve(2 * kGran);
  npuMemGenericAllocationHandle_t h = nullptr;
  const npuMemAllocationProp prop = deviceProp();
  ASSERT_NPU_OK(npuMemCreate(&h, kGran, &prop, 0));
  EXPECT_EQ(freeMemory(), before - kGran);
  ASSERT_NPU_OK(npuMemMap(p, kGran, 0, h, 0));
  // Released while mapped: the memory stays usable and counted (CUDA's rule).
  ASSERT_NPU_OK(npuMemRelease(h));
  EXPECT_NPU_OK(npuMemset(p, 7, kGran));
  EXPECT_EQ(freeMemory(), before - kGran);
  ASSERT_NPU_OK(npuMemUnmap(p, kGran));
  EXPECT_EQ(freeMemory(), before);
  EXPECT_NPU(npuErrorInvalidResourceHandle, npuMemRelease(h));
}

TEST_F(VmmTest, MappedMemoryIsDeviceMemoryForCopiesMemsetsAndAttributes) {
  char* p = reserve(4 * kGran);
  auto h1 = create(kGran);
  auto h2 = create(kGran);
  map(p, kGran, h1);
  map(p + kGran, kGran, h2);
  // One copy across the two adjacent mappings.
  std::vector<unsigned char> src(2 * kGran), back(2 * kGran, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 7 + 1);
  ASSERT_NPU_OK(npuMemcpy(p, src.data(), src.size(), npuMemcpyHostToDevice));
  auto s = makeStream();
  ASSERT_NPU_OK(npuStreamSetTaskDelay(s.get(), 2'000));
  ASSERT_NPU_OK(npuMemsetAsync(p + kGran - 8, 0xEE, 16, s.get()));
  ASSERT_NPU_OK(npuMemcpyAsync(back.data(), p, back.size(), npuMemcpyDefault, s.get()));
  ASSERT_NPU_OK(npuStreamSynchronize(s.get()));
  for (size_t i = 0; i < back.size(); ++i) {
    const bool set = i >= kGran - 8 && i < kGran + 8;
    ASSERT_EQ(back[i], set ? 0xEE : src[i]) << i;
  }
  npuPointerAttributes attributes{};
  ASSERT_NPU_OK(npuPointerGetAttributes(&attributes, p + kGran + 5));
  EXPECT_EQ(attributes.type, npuMemoryTypeDevice);
  EXPECT_EQ(attributes.device, 0);
  void* base = nullptr;
  size_t size = 0;
  ASSERT_NPU_OK(npuMemGetAddressRange(&base, &size, p + kGran + 5));
  EXPECT_EQ(base, p + kGran);  // the mapping, not the run
  EXPECT_EQ(size, kGran);
  // Beyond the last mapping: outside device memory.
  EXPECT_NPU(npuErrorInvalidDevicePointer, npuMemset(p + kGran, 0, kGran + 1));
  EXPECT_NPU(npuErrorInvalidDevicePointer, npuMemGetAddressRange(&base, &size, p + 2 * kGran));
  // Mapped memory is not npuMalloc memory.
  EXPECT_NPU(npuErrorInvalidDevicePointer, npuFree(p));
}

TEST_F(VmmTest, KernelsWriteMappedMemory) {
  char* p = reserve(kGran);
  map(p, kGran, create(kGran));
  auto s = makeStream();
  ASSERT_NPU_OK(npurt::launch(s.get(), "fill", [p] { std::memset(p, 0x5A, kGran); }));
  ASSERT_NPU_OK(npuStreamSynchronize(s.get()));
  std::vector<unsigned char> back(kGran);
  ASSERT_NPU_OK(npuMemcpy(back.data(), p, kGran, npuMemcpyDeviceToHost));
  EXPECT_EQ(back.front(), 0x5A);
  EXPECT_EQ(back.back(), 0x5A);
}

TEST_F(VmmTest, ContentsSurviveUnmapAndMapElsewhere) {
  char* p = reserve(4 * kGran);
  auto h = create(2 * kGran);
  map(p, 2 * kGran, h);
  ASSERT_NPU_OK(npuMemset(p + kGran, 0x42, kGran));
  unmap(p, 2 * kGran);
  // The second half of the memory, mapped at the end of the reservation.
  map(p + 3 * kGran, kGran, h, kGran);
  unsigned char byte = 0;
  ASSERT_NPU_OK(npuMemcpy(&byte, p + 3 * kGran + 100, 1, npuMemcpyDeviceToHost));
  EXPECT_EQ(byte, 0x42);
}

TEST_F(VmmTest, UnmappedMemoryIsRejectedLikeFreedMemory) {
  char* p = reserve(2 * kGran);
  map(p, kGran, create(kGran));
  unmap(p, kGran);
  std::vector<char> host(64);
  EXPECT_NPU(npuErrorInvalidDevicePointer, npuMemcpy(host.data(), p, 64, npuMemcpyDeviceToHost));
  EXPECT_NPU(npuErrorInvalidDevicePointer, npuMemset(p, 0, 64));
  npuPointerAttributes attributes{};
  ASSERT_NPU_OK(npuPointerGetAttributes(&attributes, p));
  EXPECT_EQ(attributes.type, npuMemoryTypeUnregistered);
  // The addresses are PROT_NONE again: the kernel refuses to write there.
  const int fd = open("/dev/zero", O_RDONLY);
  ASSERT_GE(fd, 0);
  errno = 0;
  EXPECT_EQ(read(fd, p, 1), -1);
  EXPECT_EQ(errno, EFAULT);
  close(fd);
}

TEST_F(VmmTest, QueuedCopyKeepsAnUnmappedRangeUntilItRan) {
  char* p = reserve(kGran);
  map(p, kGran, create(kGran));
  ASSERT_NPU_OK(npuMemset(p, 0x33, kGran));
  std::vector<unsigned char> back(kGran, 0);
  auto s = makeStream();
  ScopedGate gate;
  ASSERT_NPU_OK(gate.launchBlocker(s.get()));
  ASSERT_NPU_OK(npuMemcpyAsync(back.data(), p, kGran, npuMemcpyDeviceToHost, s.get()));
  unmap(p, kGran);  // the copy has not run yet
  gate.open();
  ASSERT_NPU_OK(npuStreamSynchronize(s.get()));
  EXPECT_EQ(back.front(), 0x33);
  EXPECT_EQ(back.back(), 0x33);
}

TEST_F(VmmTest, RemapWhileAnOldCopyIsQueuedKeepsTheNewMapping) {
  char* p = reserve(kGran);
  auto h1 = create(kGran);
  auto h2 = create(kGran);
  map(p, kGran, h1);
  std::vector<unsigned char> back(kGran, 0);
  auto s = makeStream();
  ScopedGate gate;
  ASSERT_NPU_OK(gate.launchBlocker(s.get()));
  ASSERT_NPU_OK(npuMemcpyAsync(back.data(), p, 16, npuMemcpyDeviceToHost, s.get()));
  unmap(p, kGran);
  map(p, kGran, h2);  // the old mapping is still held by the queued copy
  gate.open();
  ASSERT_NPU_OK(npuStreamSynchronize(s.get()));
  // The old mapping's end did not take the new one's pages away.
  EXPECT_NPU_OK(npuMemset(p, 1, kGran));
  EXPECT_NPU_OK(npurt::launch(s.get(), "touch", [p] { p[kGran - 1] = 2; }));
  EXPECT_NPU_OK(npuStreamSynchronize(s.get()));
}

TEST_F(VmmTest, OutOfCapacityLikeNpuMalloc) {
  NPURT_RUN_IN_CHILD_WITH_ENV({{"NPU_SIM_MEMORY_MB", "64"}});
  std::vector<npuMemGenericAllocationHandle_t> all;
  const npuMemAllocationProp prop = deviceProp();
  npuMemGenericAllocationHandle_t h = nullptr;
  for (int i = 0; i < 32; ++i) {
    ASSERT_NPU_OK(npuMemCreate(&h, kGran, &prop, 0));
    all.push_back(h);
  }
  EXPECT_NPU(npuErrorMemoryAllocation, npuMemCreate(&h, kGran, &prop, 0));
  EXPECT_NE(std::string(npuGetLastErrorMessage()).find("out of device memory"), std::string::npos);
  void* d = nullptr;
  EXPECT_NPU(npuErrorMemoryAllocation, npuMalloc(&d, 1));
  ASSERT_NPU_OK(npuMemRelease(all.back()));
  EXPECT_NPU_OK(npuMemCreate(&h, kGran, &prop, 0));
  all.back() = h;
  for (auto x : all) EXPECT_NPU_OK(npuMemRelease(x));
}

TEST_F(VmmTest, BadArgumentsAreRefusedWithMessages) {
  const npuMemAllocationProp prop = deviceProp();
  npuMemAllocationProp badProp = deviceProp(99);
  size_t g = 0;
  npuMemGenericAllocationHandle_t h = nullptr;
  void* p = nullptr;
  EXPECT_NPU(npuErrorInvalidValue, npuMemGetAllocationGranularity(nullptr, &prop,
                                                                  npuMemAllocationGranularityMinimum));
  EXPECT_NPU(npuErrorInvalidDevice,
             npuMemGetAllocationGranularity(&g, &badProp, npuMemAllocationGranularityMinimum));
  badProp = deviceProp();
  badProp.type = static_cast<npuMemAllocationType>(7);
  EXPECT_NPU(npuErrorInvalidValue, npuMemCreate(&h, kGran, &badProp, 0));
  EXPECT_NPU(npuErrorInvalidValue, npuMemCreate(&h, kGran, nullptr, 0));
  EXPECT_NPU(npuErrorInvalidValue, npuMemCreate(&h, kGran + 4096, &prop, 0));
  EXPECT_NE(std::string(npuGetLastErrorMessage()).find("granularity"), std::string::npos);
  EXPECT_NPU(npuErrorInvalidValue, npuMemCreate(&h, 0, &prop, 0));
  EXPECT_NPU(npuErrorInvalidValue, npuMemCreate(&h, kGran, &prop, 1));
  EXPECT_NPU(npuErrorInvalidValue, npuMemAddressReserve(&p, kGran + 1, 0, nullptr, 0));
  EXPECT_NPU(npuErrorInvalidValue, npuMemAddressReserve(&p, kGran, 3 * kGran, nullptr, 0));
  EXPECT_NPU(npuErrorInvalidValue, npuMemAddressReserve(nullptr, kGran, 0, nullptr, 0));
  EXPECT_NPU(npuErrorInvalidValue, npuMemAddressReserve(&p, kGran, 0, nullptr, 2));

  char* r = reserve(4 * kGran);
  auto h1 = create(2 * kGran);
  // Handles: NULL, garbage, a stream handle, a released one.
  EXPECT_NPU(npuErrorInvalidResourceHandle, npuMemMap(r, kGran, 0, nullptr, 0));
  EXPECT_NPU(npuErrorInvalidResourceHandle,
             npuMemMap(r, kGran, 0, reinterpret_cast<npuMemGenericAllocationHandle_t>(0x1234), 0));
  auto s = makeStream();
  EXPECT_NPU(npuErrorInvalidResourceHandle,
             npuMemMap(r, kGran, 0, reinterpret_cast<npuMemGenericAllocationHandle_t>(s.get()), 0));
  npuMemGenericAllocationHandle_t released = nullptr;
  ASSERT_NPU_OK(npuMemCreate(&released, kGran, &prop, 0));
  ASSERT_NPU_OK(npuMemRelease(released));
  EXPECT_NPU(npuErrorInvalidResourceHandle, npuMemMap(r, kGran, 0, released, 0));
  EXPECT_NPU(npuErrorInvalidResourceHandle, npuMemRelease(released));
  // Unaligned, overrunning, outside any reservation, flags.
  EXPECT_NPU(npuErrorInvalidValue, npuMemMap(r + 4096, kGran, 0, h1, 0));
  EXPECT_NPU(npuErrorInvalidValue, npuMemMap(r, kGran + 4096, 0, h1, 0));
  EXPECT_NPU(npuErrorInvalidValue, npuMemMap(r, kGran, 4096, h1, 0));
  EXPECT_NPU(npuErrorInvalidValue, npuMemMap(r, kGran, 2 * kGran, h1, 0));
  EXPECT_NE(std::string(npuGetLastErrorMessage()).find("overruns"), std::string::npos);
  EXPECT_NPU(npuErrorInvalidValue, npuMemMap(r + 3 * kGran, 2 * kGran, 0, h1, 0));
  EXPECT_NE(std::string(npuGetLastErrorMessage()).find("reservation"), std::string::npos);
  EXPECT_NPU(npuErrorInvalidValue, npuMemMap(r, kGran, 0, h1, 1));
  // Double map, partial and unmapped unmaps.
  map(r, 2 * kGran, h1);
  EXPECT_NPU(npuErrorInvalidValue, npuMemMap(r + kGran, kGran, 0, h1, 0));
  EXPECT_NE(std::string(npuGetLastErrorMessage()).find("overlaps a mapping"), std::string::npos);
  EXPECT_NPU(npuErrorInvalidValue, npuMemUnmap(r, kGran));
  EXPECT_NE(std::string(npuGetLastErrorMessage()).find("ends inside a mapping"),
            std::string::npos);
  EXPECT_NPU(npuErrorInvalidValue, npuMemUnmap(r + 2 * kGran, kGran));
  EXPECT_NE(std::string(npuGetLastErrorMessage()).find("nothing is mapped"), std::string::npos);
  EXPECT_NPU(npuErrorInvalidValue, npuMemUnmap(r + 1, kGran));
  // Freeing a reservation: with mappings, not its start, not its size.
  EXPECT_NPU(npuErrorInvalidValue, npuMemAddressFree(r, 4 * kGran));
  EXPECT_NE(std::string(npuGetLastErrorMessage()).find("still has mappings"), std::string::npos);
  EXPECT_NPU(npuErrorInvalidValue, npuMemAddressFree(r + kGran, kGran));
  EXPECT_NPU(npuErrorInvalidValue, npuMemAddressFree(r, 2 * kGran));
  // Still fully usable after all of that.
  EXPECT_NPU_OK(npuMemset(r, 0, 2 * kGran));
}

TEST_F(VmmTest, RaceDetectorSeesMappedMemory) {
  ASSERT_NPU_OK(npuRaceCheckSetMode(npuRaceCheckError));
  uint64_t before = 0;
  ASSERT_NPU_OK(npuRaceCheckGetReportCount(&before));
  char* p = reserve(kGran);
  auto h = create(kGran);
  map(p, kGran, h);
  auto s1 = makeStream();
  auto s2 = makeStream();
  ASSERT_NPU_OK(npurt::launch(s1.get(), "w1", {{p, 4096, npuMemAccessWrite}}, [] {}));
  ASSERT_NPU_OK(npurt::launch(s2.get(), "w2", {{p, 4096, npuMemAccessWrite}}, [] {}));
  EXPECT_NPU(npuErrorLaunchFailure, npuDeviceSynchronize());
  EXPECT_NE(std::string(npuGetLastErrorMessage()).find("data race"), std::string::npos);
  // Host-ordered work on a new mapping at the same addresses is no race.
  ASSERT_NPU_OK(npurt::launch(s1.get(), "w3", {{p, 4096, npuMemAccessWrite}}, [] {}));
  ASSERT_NPU_OK(npuStreamSynchronize(s1.get()));
  unmap(p, kGran);
  map(p, kGran, h);
  ASSERT_NPU_OK(npurt::launch(s2.get(), "w4", {{p, 4096, npuMemAccessWrite}}, [] {}));
  EXPECT_NPU_OK(npuDeviceSynchronize());
  uint64_t after = 0;
  ASSERT_NPU_OK(npuRaceCheckGetReportCount(&after));
  EXPECT_EQ(after - before, 1u);
  ASSERT_NPU_OK(npuRaceCheckSetMode(npuRaceCheckOff));
}

}  // namespace
}  // namespace npurt_test
