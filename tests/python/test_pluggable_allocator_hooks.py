"""The C++ hooks of a current NPUPluggableAllocator (Note [Pluggable allocator
hooks] in csrc/core/NPUPluggableAllocator.h): set_record_stream_fn,
set_erase_stream_fn, set_base_alloc_fn and the pool hooks
(set_begin_allocate_to_pool, set_end_allocate_to_pool_fn, set_release_pool),
with torch_npu's C++ signatures.

The allocator library is C++ compiled here against the package's headers
(c10_npu::NPUStream and c10_npu::MempoolId_t are C++ types); it records what
each hook was called with. change_current_allocator needs a fresh process, so
each test runs one.
"""

import os
import subprocess
import sysconfig
import textwrap

import pytest
from torch.utils import cpp_extension as torch_cpp_extension

import torch_npu
from torch_npu.utils import cpp_extension

from conftest import run_py, run_py_ok

HOOKS_CPP = textwrap.dedent(
    r"""
    #include <sys/types.h>

    #include <cstdint>
    #include <functional>

    #include "acl/acl.h"
    #include "torch_npu/csrc/core/npu/NPUCachingAllocator.h"
    #include "torch_npu/csrc/core/npu/NPUGraphsUtils.h"
    #include "torch_npu/csrc/core/npu/NPUStream.h"

    namespace {
    int64_t recorded_ptr, recorded_stream, erased_ptr, erased_stream;
    int begins, ends, releases, filter_true, filter_false;
    uint64_t pool_second;
    std::function<bool(aclrtStream)> filter;
    }

    extern "C" {
    void* hook_alloc(ssize_t size, int device, aclrtStream stream) {
      void* p = nullptr;
      (void)device;
      if (filter) (filter(stream) ? filter_true : filter_false)++;
      if (aclrtMallocAlign32(&p, static_cast<size_t>(size), ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) {
        return nullptr;
      }
      return p;
    }
    void hook_free(void* p, ssize_t size, int device, aclrtStream stream) {
      (void)size; (void)device; (void)stream;
      aclrtFree(p);
    }
    void* hook_base_alloc(void* ptr, size_t* size) {
      *size = 4096;  // a recognisable answer
      return static_cast<char*>(ptr) - 64;
    }
    int64_t base_of(void* ptr, size_t* size) {
      try {
        return reinterpret_cast<int64_t>(c10_npu::NPUCachingAllocator::getBaseAllocation(ptr, size));
      } catch (const c10::Error&) {
        return -1;
      }
    }
    int64_t hook_recorded_ptr() { return recorded_ptr; }
    int64_t hook_recorded_stream() { return recorded_stream; }
    int64_t hook_erased_ptr() { return erased_ptr; }
    int64_t hook_erased_stream() { return erased_stream; }
    int hook_begins() { return begins; }
    int hook_ends() { return ends; }
    int hook_releases() { return releases; }
    int hook_filter_true() { return filter_true; }
    int hook_filter_false() { return filter_false; }
    uint64_t hook_pool_second() { return pool_second; }
    }

    // torch_npu's C++ signatures (not extern "C": they take C++ types).
    void hook_record_stream(void* ptr, c10_npu::NPUStream stream) {
      recorded_ptr = reinterpret_cast<int64_t>(ptr);
      recorded_stream = stream.id();
    }
    void hook_erase_stream(void* ptr, c10_npu::NPUStream stream) {
      erased_ptr = reinterpret_cast<int64_t>(ptr);
      erased_stream = stream.id();
    }
    void hook_begin(int device, c10_npu::MempoolId_t id, std::function<bool(aclrtStream)> f) {
      (void)device;
      ++begins;
      pool_second = id.second;
      filter = std::move(f);
    }
    void hook_end(int device, c10_npu::MempoolId_t id) { (void)device; (void)id; ++ends; filter = nullptr; }
    void hook_release(int device, c10_npu::MempoolId_t id) { (void)device; (void)id; ++releases; }

    // Addresses of the C++ hooks for ctypes.
    extern "C" {
    void* addr_record_stream() { return reinterpret_cast<void*>(&hook_record_stream); }
    void* addr_erase_stream() { return reinterpret_cast<void*>(&hook_erase_stream); }
    void* addr_begin() { return reinterpret_cast<void*>(&hook_begin); }
    void* addr_end() { return reinterpret_cast<void*>(&hook_end); }
    void* addr_release() { return reinterpret_cast<void*>(&hook_release); }
    }
    """
)

PRELUDE = """
import ctypes, sys
import torch, torch_npu
from torch_npu.npu import NPUPluggableAllocator

so = sys.argv[1] if len(sys.argv) > 1 else {so!r}
lib = ctypes.CDLL(so)
for name in ("addr_record_stream", "addr_erase_stream", "addr_begin", "addr_end", "addr_release"):
    getattr(lib, name).restype = ctypes.c_void_p
for name in ("hook_recorded_ptr", "hook_recorded_stream", "hook_erased_ptr", "hook_erased_stream",
             "base_of"):
    getattr(lib, name).restype = ctypes.c_int64
lib.hook_pool_second.restype = ctypes.c_uint64
lib.base_of.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]
alloc = NPUPluggableAllocator(so, "hook_alloc", "hook_free")
handle = alloc.allocator()
torch_npu.npu.change_current_allocator(alloc)
"""


CACHING_PRELUDE = """
import ctypes, sys
import torch, torch_npu
lib = ctypes.CDLL({so!r})
lib.base_of.restype = ctypes.c_int64
lib.base_of.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]
size = ctypes.c_size_t(0)
"""


@pytest.fixture(scope="module", name="so_path")
def _so_path(tmp_path_factory):
    d = tmp_path_factory.mktemp("pluggable_hooks")
    (d / "hooks.cpp").write_text(HOOKS_CPP)
    out = d / "libhooks.so"
    ext = cpp_extension.NpuExtension("hooks", ["hooks.cpp"])
    command = ["g++", "-std=c++17", "-shared", "-fPIC", "-O0", str(d / "hooks.cpp"), "-o", str(out)]
    command += [f"-I{p}" for p in ext.include_dirs + torch_cpp_extension.include_paths()]
    command += [f"-I{sysconfig.get_paths()['include']}"]
    command += [f"-L{p}" for p in ext.library_dirs] + [f"-l{lib}" for lib in ext.libraries]
    command += [f"-Wl,-rpath,{p}" for p in ext.library_dirs]
    # Under make sanitize the interpreter runs with the sanitizer runtimes
    # preloaded; the compiler need not.
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    subprocess.run(command, check=True, env=env)
    return str(out)


def test_record_and_erase_stream_reach_the_hooks(so_path):
    out = run_py_ok(PRELUDE.format(so=so_path) + """
handle.set_record_stream_fn(lib.addr_record_stream())
handle.set_erase_stream_fn(lib.addr_erase_stream())
x = torch.empty(1024, device="npu")
s = torch_npu.npu.Stream()
x.record_stream(s)
print(lib.hook_recorded_ptr() == x.data_ptr(), lib.hook_recorded_stream() == s.stream_id)
torch_npu.erase_stream(x, s)
print(lib.hook_erased_ptr() == x.data_ptr(), lib.hook_erased_stream() == s.stream_id)
y = torch.empty(4, device="cpu")
""")
    assert out.split() == ["True", "True", "True", "True"]


def test_base_allocation_asks_the_hook(so_path):
    out = run_py_ok(PRELUDE.format(so=so_path) + """
x = torch.empty(1024, device="npu")
size = ctypes.c_size_t(7)
print(lib.base_of(x.data_ptr(), ctypes.byref(size)) == x.data_ptr(), size.value)
handle.set_base_alloc_fn(ctypes.cast(lib.hook_base_alloc, ctypes.c_void_p).value)
print(lib.base_of(x.data_ptr(), ctypes.byref(size)) == x.data_ptr() - 64, size.value)
""")
    # Without a hook the pointer is its own base and the size is left alone.
    assert out.split() == ["True", "7", "True", "4096"]


def test_pool_hooks_see_use_mem_pool(so_path):
    out = run_py_ok(PRELUDE.format(so=so_path) + """
pool = torch_npu.npu.MemPool()
try:
    with torch_npu.npu.use_mem_pool(pool):
        pass
except RuntimeError as e:
    print("refused", "set_begin_allocate_to_pool" in str(e))
print(pool.use_count())
handle.set_begin_allocate_to_pool(lib.addr_begin())
handle.set_end_allocate_to_pool_fn(lib.addr_end())
handle.set_release_pool(lib.addr_release())
with torch_npu.npu.use_mem_pool(pool):
    print(pool.use_count(), lib.hook_begins(), lib.hook_pool_second() == pool.id[1])
    x = torch.empty(1024, device="npu")  # the alloc function asks the filter
print(lib.hook_filter_true(), lib.hook_filter_false(), lib.hook_ends(), lib.hook_releases())
print(pool.use_count())
""")
    assert out.split() == ["refused", "True", "1", "2", "1", "True", "1", "0", "1", "1", "1"]


def test_hook_setters_refuse_null(so_path):
    p = run_py(PRELUDE.format(so=so_path) + """
for name in ("set_base_alloc_fn", "set_record_stream_fn", "set_erase_stream_fn",
             "set_begin_allocate_to_pool", "set_end_allocate_to_pool_fn", "set_release_pool"):
    try:
        getattr(handle, name)(0)
    except ValueError as e:
        print(name, "NULL" in str(e))
""")
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == [w for name in ("set_base_alloc_fn", "set_record_stream_fn",
                                               "set_erase_stream_fn", "set_begin_allocate_to_pool",
                                               "set_end_allocate_to_pool_fn", "set_release_pool")
                                for w in (name, "True")]


def test_base_allocation_of_the_caching_allocator_is_the_segment(so_path):
    out = run_py_ok(CACHING_PRELUDE.format(so=so_path) + """
s = torch_npu.npu.Stream()
with torch_npu.npu.stream(s):
    a = torch.empty(3 << 20, dtype=torch.uint8, device="npu")  # both from one 20 MiB segment
    b = torch.empty(3 << 20, dtype=torch.uint8, device="npu")
[seg] = [g for g in torch_npu.npu.memory_snapshot() if g["stream"] == s.stream_id]
for t in (a, b):
    print(lib.base_of(t.data_ptr(), ctypes.byref(size)) == seg["address"], size.value == seg["total_size"])
print(lib.base_of(12345, ctypes.byref(size)))  # not an allocation: raises (caught in C++)
torch_npu.npu.memory._set_allocator_settings("expandable_segments:True")
with torch_npu.npu.stream(torch_npu.npu.Stream()):
    c = torch.empty(30 << 20, dtype=torch.uint8, device="npu")
print(lib.base_of(c.data_ptr(), ctypes.byref(size)))  # expandable: refused, as torch_npu
""")
    assert out.split() == ["True", "True", "True", "True", "-1", "-1"]
