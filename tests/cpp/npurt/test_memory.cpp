// Covers memory: npuMalloc/npuFree (alignment, size 0, NULL, interior and
// double frees), the capacity limit (64 MB child process) and memory info,
// synchronous and asynchronous copies of every kind including Default,
// memset, range checks against live allocations, direction mismatches,
// npuFree while an asynchronous copy is queued, host registration, pointer
// attributes and pinned host memory. See Note [Memory lifetime].
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "test_util.h"

namespace npurt_test {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

// Device allocation freed on scope exit.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t size) { status_ = npuMalloc(&ptr_, size); }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) (void)npuFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  char* get() const { return static_cast<char*>(ptr_); }
  npuError_t status() const { return status_; }

 private:
  void* ptr_ = nullptr;
  npuError_t status_ = npuSuccess;
};

std::vector<unsigned char> pattern(size_t n, unsigned seed) {
  std::vector<unsigned char> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<unsigned char>((i * 131 + seed) & 0xff);
  return v;
}

size_t freeMemory() {
  size_t free = 0, total = 0;
  EXPECT_NPU_OK(npuMemGetInfo(&free, &total));
  return free;
}

class MemoryTest : public NpurtTest {};

TEST_F(MemoryTest, MallocIsAlignedAndFreeRestoresMemInfo) {
  const size_t before = freeMemory();
  void* p = nullptr;
  ASSERT_NPU_OK(npuMalloc(&p, kMiB));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  EXPECT_EQ(freeMemory(), before - kMiB);
  ASSERT_NPU_OK(npuFree(p));
  EXPECT_EQ(freeMemory(), before);
  for (size_t size : {size_t{1}, size_t{63}, size_t{65}, size_t{4097}}) {
    ASSERT_NPU_OK(npuMalloc(&p, size));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << size;
    ASSERT_NPU_OK(npuFree(p));
  }
  EXPECT_EQ(freeMemory(), before);
}

TEST_F(MemoryTest, ZeroSizeGivesNullAndFreeNullIsANoOp) {
  void* p = reinterpret_cast<void*>(uintptr_t{0x1234});
  ASSERT_NPU_OK(npuMalloc(&p, 0));
  EXPECT_EQ(p, nullptr);
  EXPECT_NPU_OK(npuFree(nullptr));
}

TEST_F(MemoryTest, RequestAboveCapacityFailsWithMemoryAllocation) {
  void* p = nullptr;
  EXPECT_NPU(npuErrorMemoryAllocation, npuMalloc(&p, size_t{9} << 30));
  EXPECT_NE(std::string(npuGetLastErrorMessage()), "");
  EXPECT_NPU(npuErrorMemoryAllocation, npuMalloc(&p, SIZE_MAX));
  DeviceBuffer ok(kMiB);
  EXPECT_NPU_OK(ok.status()) << "the device stays usable";
}

TEST_F(MemoryTest, CapacityIsEnforcedAndTheDeviceStaysUsable) {
  NPURT_RUN_IN_CHILD_WITH_ENV({{"NPU_SIM_MEMORY_MB", "64"}});
  size_t free = 0, total = 0;
  ASSERT_NPU_OK(npuMemGetInfo(&free, &total));
  ASSERT_EQ(total, 64 * kMiB);
  ASSERT_EQ(free, 64 * kMiB);
  void* big = nullptr;
  ASSERT_NPU_OK(npuMalloc(&big, 48 * kMiB));
  void* tooMuch = nullptr;
  EXPECT_NPU(npuErrorMemoryAllocation, npuMalloc(&tooMuch, 17 * kMiB));
  ASSERT_NPU_OK(npuMemGetInfo(&free, &total));
  EXPECT_EQ(free, 16 * kMiB) << "a failed allocation must not consume capacity";
  void* rest = nullptr;
  ASSERT_NPU_OK(npuMalloc(&rest, 16 * kMiB)) << "exactly the remaining capacity fits";
  void* one = nullptr;
  EXPECT_NPU(npuErrorMemoryAllocation, npuMalloc(&one, 64));
  {
    npurt::DeviceGuard guard(1);  // the capacity is per device
    DeviceBuffer other(32 * kMiB);
    EXPECT_NPU_OK(other.status());
  }
  ASSERT_NPU_OK(npuFree(big));
  ASSERT_NPU_OK(npuFree(rest));
  // Usable afterwards: allocate, copy through a stream, read back.
  ASSERT_NPU_OK(npuMalloc(&big, 64 * kMiB));
  auto s = makeStream();
  std::vector<unsigned char> host = pattern(4096, 7), back(4096, 0);
  ASSERT_NPU_OK(npuMemcpyAsync(big, host.data(), host.size(), npuMemcpyHostToDevice, s.get()));
  ASSERT_NPU_OK(npuMemcpyAsync(back.data(), big, back.size(), npuMemcpyDeviceToHost, s.get()));
  ASSERT_NPU_OK(npuStreamSynchronize(s.get()));
  EXPECT_EQ(host, back);
  ASSERT_NPU_OK(npuFree(big));
}

TEST_F(MemoryTest, SynchronousCopiesOfEveryKindRoundTrip) {
  const size_t n = 10000;
  DeviceBuffer a(n), b(n);
  ASSERT_NPU_OK(a.status());
  ASSERT_NPU_OK(b.status());
  auto src = pattern(n, 1);
  std::vector<unsigned char> h1(n, 0), h2(n, 0);
  ASSERT_NPU_OK(npuMemcpy(a.get(), src.data(), n, npuMemcpyHostToDevice));
  ASSERT_NPU_OK(npuMemcpy(b.get(), a.get(), n, npuMemcpyDeviceToDevice));
  ASSERT_NPU_OK(npuMemcpy(h1.data(), b.get(), n, npuMemcpyDeviceToHost));
  EXPECT_EQ(h1, src);
  ASSERT_NPU_OK(npuMemcpy(h2.data(), h1.data(), n, npuMemcpyHostToHost));
  EXPECT_EQ(h2, src);
}

TEST_F(MemoryTest, DefaultKindIsInferredFromThePointers) {
  const size_t n = 4096;
  DeviceBuffer a(n), b(n);
  auto src = pattern(n, 2);
  std::vector<unsigned char> h1(n, 0), h2(n, 0);
  ASSERT_NPU_OK(npuMemcpy(a.get(), src.data(), n, npuMemcpyDefault));
  ASSERT_NPU_OK(npuMemcpy(b.get(), a.get(), n, npuMemcpyDefault));
  ASSERT_NPU_OK(npuMemcpy(h1.data(), b.get(), n, npuMemcpyDefault));
  ASSERT_NPU_OK(npuMemcpy(h2.data(), h1.data(), n, npuMemcpyDefault));
  EXPECT_EQ(h1, src);
  EXPECT_EQ(h2, src);
}

TEST_F(MemoryTest, AsynchronousCopiesOfEveryKindRunInStreamOrder) {
  const size_t n = 8192;
  DeviceBuffer a(n), b(n);
  auto s = makeStream();
  ASSERT_NPU_OK(npuStreamSetTaskDelay(s.get(), 5'000));
  auto src = pattern(n, 3);
  std::vector<unsigned char> h1(n, 0), h2(n, 0), h3(n, 0);
  const npuMemcpyKind kinds[2] = {npuMemcpyHostToDevice, npuMemcpyDefault};
  for (npuMemcpyKind first : kinds) {
    std::fill(h1.begin(), h1.end(), 0);
    ASSERT_NPU_OK(npuMemcpyAsync(a.get(), src.data(), n, first, s.get()));
    ASSERT_NPU_OK(npuMemcpyAsync(
        b.get(), a.get(), n, first == npuMemcpyDefault ? npuMemcpyDefault : npuMemcpyDeviceToDevice,
        s.get()));
    ASSERT_NPU_OK(npuMemcpyAsync(
        h1.data(), b.get(), n, first == npuMemcpyDefault ? npuMemcpyDefault : npuMemcpyDeviceToHost,
        s.get()));
    ASSERT_NPU_OK(npuMemcpyAsync(h2.data(), h1.data(), n,
                                 first == npuMemcpyDefault ? npuMemcpyDefault : npuMemcpyHostToHost,
                                 s.get()));
    ASSERT_NPU_OK(npuStreamSynchronize(s.get()));
    EXPECT_EQ(h1, src);
    EXPECT_EQ(h2, src);
  }
  (void)h3;
}

TEST_F(MemoryTest, MemsetSetsTheLowByteOverTheRange) {
  const size_t n = 1024;
  DeviceBuffer d(n);
  std::vector<unsigned char> host(n, 0);
  ASSERT_NPU_OK(npuMemset(d.get(), 0, n));
  ASSERT_NPU_OK(npuMemset(d.get() + 100, 0x1AB, 200));  // only the low byte counts
  ASSERT_NPU_OK(npuMemcpy(host.data(), d.get(), n, npuMemcpyDeviceToHost));
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(host[i], (i >= 100 && i < 300) ? 0xAB : 0) << i;
  }
}

TEST_F(MemoryTest, MemsetAsyncRunsInStreamOrder) {
  const size_t n = 512;
  DeviceBuffer d(n);
  auto s = makeStream();
  std::vector<unsigned char> host(n, 0);
  ASSERT_NPU_OK(npuMemsetAsync(d.get(), 0x11, n, s.get()));
  ASSERT_NPU_OK(npuMemsetAsync(d.get() + n / 2, 0x22, n / 2, s.get()));
  ASSERT_NPU_OK(npuMemcpyAsync(host.data(), d.get(), n, npuMemcpyDeviceToHost, s.get()));
  ASSERT_NPU_OK(npuStreamSynchronize(s.get()));
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(host[i], i < n / 2 ? 0x11 : 0x22) << i;
}

TEST_F(MemoryTest, RangesMustLieInsideOneLiveAllocation) {
  const size_t n = 256;
  DeviceBuffer d(n);
  auto s = makeStream();
  std::vector<unsigned char> host(2 * n, 0);
  const npuError_t bad = npuErrorInvalidDevicePointer;
  EXPECT_NPU_OK(npuMemcpy(d.get() + 64, host.data(), n - 64, npuMemcpyHostToDevice));
  EXPECT_NPU(bad, npuMemcpy(d.get(), host.data(), n + 1, npuMemcpyHostToDevice));
  EXPECT_NPU(bad, npuMemcpy(d.get() + 64, host.data(), n - 63, npuMemcpyHostToDevice));
  EXPECT_NPU(bad, npuMemcpy(host.data(), d.get() + 1, n, npuMemcpyDeviceToHost));
  EXPECT_NPU(bad, npuMemcpy(d.get() + n, host.data(), 1, npuMemcpyHostToDevice));
  EXPECT_NPU(bad, npuMemcpyAsync(d.get(), host.data(), n + 1, npuMemcpyHostToDevice, s.get()));
  EXPECT_NPU(bad, npuMemcpyAsync(host.data(), d.get() + 8, n, npuMemcpyDeviceToHost, s.get()));
  EXPECT_NPU(bad, npuMemset(d.get() + 1, 0, n));
  EXPECT_NPU(bad, npuMemsetAsync(d.get(), 0, n + 1, s.get()));
  EXPECT_NPU(bad, npuMemcpy(d.get(), d.get() + 1, n, npuMemcpyDeviceToDevice));
  EXPECT_NPU(bad, npuMemcpy(d.get() - 1, host.data(), 1, npuMemcpyHostToDevice));
  ASSERT_NPU_OK(npuStreamSynchronize(s.get()));
}

TEST_F(MemoryTest, CopiesTouchingFreedMemoryAreInvalidDevicePointer) {
  void* p = nullptr;
  ASSERT_NPU_OK(npuMalloc(&p, 256));
  ASSERT_NPU_OK(npuFree(p));
  auto s = makeStream();
  char host[256] = {};
  const npuError_t bad = npuErrorInvalidDevicePointer;
  EXPECT_NPU(bad, npuMemcpy(p, host, 16, npuMemcpyHostToDevice));
  EXPECT_NPU(bad, npuMemcpy(host, p, 16, npuMemcpyDeviceToHost));
  EXPECT_NPU(bad, npuMemcpyAsync(p, host, 16, npuMemcpyHostToDevice, s.get()));
  EXPECT_NPU(bad, npuMemset(p, 0, 16));
  EXPECT_NPU(bad, npuMemsetAsync(p, 0, 16, s.get()));
  EXPECT_NPU(bad, npuFree(p)) << "double free";
  ASSERT_NPU_OK(npuStreamSynchronize(s.get()));
}

TEST_F(MemoryTest, DirectionMismatchIsInvalidMemcpyDirection) {
  DeviceBuffer a(64), b(64);
  char h1[64] = {}, h2[64] = {};
  const npuError_t bad = npuErrorInvalidMemcpyDirection;
  auto s = makeStream();
  // A device pointer where the kind says host memory.
  EXPECT_NPU(bad, npuMemcpy(a.get(), b.get(), 64, npuMemcpyHostToDevice));
  EXPECT_NPU(bad, npuMemcpy(a.get(), b.get(), 64, npuMemcpyDeviceToHost));
  EXPECT_NPU(bad, npuMemcpy(h1, a.get(), 64, npuMemcpyHostToHost));
  EXPECT_NPU(bad, npuMemcpy(a.get(), h1, 64, npuMemcpyHostToHost));
  EXPECT_NPU(bad, npuMemcpyAsync(a.get(), b.get(), 64, npuMemcpyHostToDevice, s.get()));
  EXPECT_NPU(bad, npuMemcpyAsync(h2, a.get(), 64, npuMemcpyHostToHost, s.get()));
  ASSERT_NPU_OK(npuStreamSynchronize(s.get()));
}

TEST_F(MemoryTest, FreeOfAnInteriorPointerIsRejectedAndKeepsTheAllocation) {
  const size_t before = freeMemory();
  void* p = nullptr;
  ASSERT_NPU_OK(npuMalloc(&p, 1024));
  EXPECT_NPU(npuErrorInvalidDevicePointer, npuFree(static_cast<char*>(p) + 64));
  EXPECT_NPU_OK(npuMemset(p, 1, 1024)) << "the allocation is still live";
  ASSERT_NPU_OK(npuFree(p));
  EXPECT_EQ(freeMemory(), before);
}

TEST_F(MemoryTest, FreeWhileAnAsyncCopyIsQueuedKeepsTheMemoryUntilItRuns) {
  const size_t before = freeMemory();
  const size_t n = kMiB;
  void* d = nullptr;
  ASSERT_NPU_OK(npuMalloc(&d, n));
  ASSERT_NPU_OK(npuMemset(d, 0x5A, n));
  auto s = makeStream();
  ScopedGate gate;
  std::vector<unsigned char> host(n, 0);
  ASSERT_NPU_OK(gate.launchBlocker(s.get()));
  ASSERT_NPU_OK(npuMemcpyAsync(host.data(), d, n, npuMemcpyDeviceToHost, s.get()));
  ASSERT_NPU_OK(npuMemsetAsync(d, 0x00, n / 2, s.get()));
  ASSERT_NPU_OK(npuFree(d));
  EXPECT_NPU(npuErrorInvalidDevicePointer, npuMemset(d, 0, 16)) << "freed for new calls";
  EXPECT_EQ(freeMemory(), before - n) << "capacity is held until the queued copy ran";
  gate.open();
  ASSERT_NPU_OK(npuStreamSynchronize(s.get()));
  EXPECT_EQ(host, std::vector<unsigned char>(n, 0x5A));
  EXPECT_EQ(freeMemory(), before) << "capacity is returned once the copy finished";
}

TEST_F(MemoryTest, HostRegisterAndUnregister) {
  std::vector<char> buffer(4096);
  char* p = buffer.data();
  ASSERT_NPU_OK(npuHostRegister(p, 2048, 0));
  npuPointerAttributes attr{};
  ASSERT_NPU_OK(npuPointerGetAttributes(&attr, p + 100));
  EXPECT_EQ(attr.type, npuMemoryTypeHost);
  EXPECT_EQ(attr.device, -1);
  EXPECT_EQ(attr.basePointer, p);
  EXPECT_EQ(attr.size, 2048u);
  const npuError_t again = npuErrorHostMemoryAlreadyRegistered;
  EXPECT_NPU(again, npuHostRegister(p, 2048, 0));
  EXPECT_NPU(again, npuHostRegister(p + 1024, 2048, 0)) << "overlapping the tail";
  EXPECT_NPU(again, npuHostRegister(p + 100, 10, 0)) << "inside";
  ASSERT_NPU_OK(npuHostRegister(p + 2048, 1024, 0)) << "adjacent, not overlapping";
  EXPECT_NPU(npuErrorHostMemoryNotRegistered, npuHostUnregister(p + 1));
  ASSERT_NPU_OK(npuHostUnregister(p));
  ASSERT_NPU_OK(npuHostUnregister(p + 2048));
  EXPECT_NPU(npuErrorHostMemoryNotRegistered, npuHostUnregister(p));
  ASSERT_NPU_OK(npuPointerGetAttributes(&attr, p + 100));
  EXPECT_EQ(attr.type, npuMemoryTypeUnregistered);
  ASSERT_NPU_OK(npuHostRegister(p, 4096, 0)) << "re-register after unregister";
  ASSERT_NPU_OK(npuHostUnregister(p));
}

TEST_F(MemoryTest, MappedHostMemoryIsDeviceMemoryOfTheCurrentDeviceUntilUnregistered) {
  // Note [Mapped host memory].
  std::vector<unsigned char> buffer(4096, 0);
  unsigned char* p = buffer.data();
  void* devPtr = nullptr;
  EXPECT_NPU(npuErrorInvalidValue, npuHostGetDevicePointer(&devPtr, p, 0)) << "not registered";
  ASSERT_NPU_OK(npuHostRegister(p, 2048, 0));
  EXPECT_NPU(npuErrorInvalidValue, npuHostGetDevicePointer(&devPtr, p, 0)) << "not mapped";
  ASSERT_NPU_OK(npuHostUnregister(p));
  EXPECT_NPU(npuErrorInvalidValue, npuHostRegister(p, 2048, 1u)) << "portable is not a flag here";

  ASSERT_NPU_OK(npuHostRegister(p, 2048, npuHostRegisterMapped));
  ASSERT_NPU_OK(npuHostGetDevicePointer(&devPtr, p + 16, 0));
  EXPECT_EQ(devPtr, p + 16) << "one address space";
  EXPECT_NPU(npuErrorInvalidValue, npuHostGetDevicePointer(&devPtr, p + 16, 1u));
  npuPointerAttributes attr{};
  ASSERT_NPU_OK(npuPointerGetAttributes(&attr, p + 100));
  EXPECT_EQ(attr.type, npuMemoryTypeHost);
  EXPECT_EQ(attr.device, 0);
  EXPECT_EQ(attr.basePointer, p);

  // A device-side memset and device-to-device copies reach it; it is host memory too.
  ASSERT_NPU_OK(npuMemset(p, 0x5A, 1024));
  EXPECT_EQ(buffer[1023], 0x5A);
  EXPECT_EQ(buffer[1024], 0);
  void* dev = nullptr;
  ASSERT_NPU_OK(npuMalloc(&dev, 1024));
  ASSERT_NPU_OK(npuMemcpy(dev, p, 1024, npuMemcpyDeviceToDevice));
  ASSERT_NPU_OK(npuMemcpy(p + 1024, dev, 1024, npuMemcpyDeviceToHost));
  EXPECT_EQ(buffer[2047], 0x5A);
  EXPECT_NPU(npuErrorInvalidDevicePointer, npuMemset(p + 1024, 0, 2048)) << "overruns the mapping";
  EXPECT_NPU(npuErrorInvalidDevicePointer, npuFree(p));
  EXPECT_NE(std::string(npuGetLastErrorMessage()).find("npuHostUnregister it"), std::string::npos);

  ASSERT_NPU_OK(npuHostUnregister(p));
  EXPECT_NPU(npuErrorInvalidDevicePointer, npuMemset(p, 0, 16)) << "no longer device memory";
  // Device memory inside the range (it is host memory here): refused, never
  // two device-map entries over one address.
  unsigned char* d = static_cast<unsigned char*>(dev);
  EXPECT_NPU(npuErrorInvalidValue, npuHostRegister(d - 64, 128, npuHostRegisterMapped));
  EXPECT_NE(std::string(npuGetLastErrorMessage()).find("device memory"), std::string::npos);
  npuPointerAttributes devAttr{};
  ASSERT_NPU_OK(npuPointerGetAttributes(&devAttr, d));
  EXPECT_EQ(devAttr.type, npuMemoryTypeDevice);
  EXPECT_NPU(npuErrorInvalidValue, npuHostGetDevicePointer(&devPtr, p, 0));
  ASSERT_NPU_OK(npuFree(dev));
}

// True if any page of [p, p + size) is mapped (mincore succeeds only then).
bool anyPageMapped(char* p, size_t size, size_t page) {
  unsigned char residency = 0;
  for (size_t at = 0; at < size; at += page) {
    if (mincore(p + at, page, &residency) == 0) return true;
  }
  return false;
}

TEST_F(MemoryTest, HostRegisterRejectsUnmappedMemory) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  // Below vm.mmap_min_addr: nothing is ever mapped there.
  EXPECT_NPU(npuErrorInvalidValue, npuHostRegister(reinterpret_cast<void*>(page), page, 0));
  EXPECT_NE(std::string(npuGetLastErrorMessage()).find("not mapped"), std::string::npos);
  // Mapped, then a hole punched in the middle, then all unmapped. Any mmap
  // (ASan's allocator, another thread) may reuse a hole at once, so a
  // success only fails the test if the hole was still unmapped afterwards.
  const auto rejects = [&](char* at, size_t size, char* hole, size_t holeSize) {
    const npuError_t status = npuHostRegister(at, size, 0);
    if (status == npuErrorInvalidValue) return true;
    if (status == npuSuccess) (void)npuHostUnregister(at);
    return anyPageMapped(hole, holeSize, page);  // reused meanwhile: inconclusive
  };
  void* raw = mmap(nullptr, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(raw, MAP_FAILED);
  char* p = static_cast<char*>(raw);
  ASSERT_EQ(munmap(p + page, page), 0);
  EXPECT_TRUE(rejects(p, 3 * page, p + page, page)) << "a range spanning the hole";
  EXPECT_TRUE(rejects(p + page + 8, 16, p + page, page)) << "inside the hole";
  ASSERT_NPU_OK(npuHostRegister(p, page, 0)) << "the mapped first page";
  ASSERT_NPU_OK(npuHostUnregister(p));
  ASSERT_EQ(munmap(p, page), 0);
  ASSERT_EQ(munmap(p + 2 * page, page), 0);
  EXPECT_TRUE(rejects(p, 3 * page, p, 3 * page)) << "mmap'ed, then munmap'ed";
}

TEST_F(MemoryTest, UnregisteringUnknownHostMemoryIsNotRegistered) {
  int x = 0;
  EXPECT_NPU(npuErrorHostMemoryNotRegistered, npuHostUnregister(&x));
}

TEST_F(MemoryTest, PointerAttributesOfDeviceMemory) {
  DeviceBuffer d0(1000);
  npuPointerAttributes attr{};
  ASSERT_NPU_OK(npuPointerGetAttributes(&attr, d0.get() + 999));
  EXPECT_EQ(attr.type, npuMemoryTypeDevice);
  EXPECT_EQ(attr.device, 0);
  EXPECT_EQ(attr.basePointer, d0.get());
  EXPECT_EQ(attr.size, 1000u);
  npurt::DeviceGuard guard(1);
  DeviceBuffer d1(64);
  ASSERT_NPU_OK(npuPointerGetAttributes(&attr, d1.get()));
  EXPECT_EQ(attr.type, npuMemoryTypeDevice);
  EXPECT_EQ(attr.device, 1);
}

TEST_F(MemoryTest, PointerAttributesOfUnknownOrFreedMemory) {
  int local = 0;
  npuPointerAttributes attr{};
  ASSERT_NPU_OK(npuPointerGetAttributes(&attr, &local));
  EXPECT_EQ(attr.type, npuMemoryTypeUnregistered);
  EXPECT_EQ(attr.device, -1);
  EXPECT_EQ(attr.basePointer, nullptr);
  EXPECT_EQ(attr.size, 0u);
  ASSERT_NPU_OK(npuPointerGetAttributes(&attr, nullptr));
  EXPECT_EQ(attr.type, npuMemoryTypeUnregistered);
  void* p = nullptr;
  ASSERT_NPU_OK(npuMalloc(&p, 128));
  ASSERT_NPU_OK(npuFree(p));
  ASSERT_NPU_OK(npuPointerGetAttributes(&attr, p));
  EXPECT_EQ(attr.type, npuMemoryTypeUnregistered);
  EXPECT_EQ(attr.device, -1);
}

TEST_F(MemoryTest, MallocHostGivesPinnedUsableMemory) {
  void* h = nullptr;
  ASSERT_NPU_OK(npuMallocHost(&h, 4096));
  ASSERT_NE(h, nullptr);
  std::memset(h, 0x3C, 4096);
  npuPointerAttributes attr{};
  ASSERT_NPU_OK(npuPointerGetAttributes(&attr, static_cast<char*>(h) + 10));
  EXPECT_EQ(attr.type, npuMemoryTypeHost);
  EXPECT_EQ(attr.basePointer, h);
  EXPECT_EQ(attr.size, 4096u);
  DeviceBuffer d(4096);
  ASSERT_NPU_OK(npuMemcpy(d.get(), h, 4096, npuMemcpyDefault));
  std::vector<unsigned char> back(4096);
  ASSERT_NPU_OK(npuMemcpy(back.data(), d.get(), 4096, npuMemcpyDeviceToHost));
  EXPECT_EQ(back, std::vector<unsigned char>(4096, 0x3C));
  const size_t before = freeMemory();
  void* h2 = nullptr;
  ASSERT_NPU_OK(npuMallocHost(&h2, kMiB));
  EXPECT_EQ(freeMemory(), before) << "pinned host memory is not device capacity";
  ASSERT_NPU_OK(npuFreeHost(h2));
  ASSERT_NPU_OK(npuFreeHost(h));
}

TEST_F(MemoryTest, HugeHostAllocationFailsWithMemoryAllocation) {
  void* h = nullptr;
  EXPECT_NPU(npuErrorMemoryAllocation, npuMallocHost(&h, SIZE_MAX / 2));
}

}  // namespace
}  // namespace npurt_test
