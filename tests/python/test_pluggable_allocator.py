"""User allocators from a shared library (torch_npu.npu.NPUPluggableAllocator):
as the segment source of a MemPool, as the current allocator
(change_current_allocator), and their faults and bad arguments.

The allocator library is compiled here from C against the package's ACL
headers; it counts its calls so the tests can check that every segment it
handed out came back to it, with the size it was allocated with.
"""

import ctypes
import os
import subprocess
import textwrap

import pytest
import torch
import torch_npu
from torch_npu.npu import NPUPluggableAllocator

from conftest import run_py

PKG = os.path.dirname(os.path.abspath(torch_npu.__file__))

ALLOCATOR_C = textwrap.dedent(
    r"""
    #include <stddef.h>
    #include <sys/types.h>
    #include "acl/acl.h"

    static long allocs, frees, bytes_out, resets;
    static int inits = -1;

    void* counting_alloc(ssize_t size, int device, aclrtStream stream) {
      void* p = NULL;
      (void)device; (void)stream;
      if (aclrtMallocAlign32(&p, (size_t)size, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) return NULL;
      allocs++;
      bytes_out += size;
      return p;
    }
    void counting_free(void* p, ssize_t size, int device, aclrtStream stream) {
      (void)device; (void)stream;
      frees++;
      bytes_out -= size;
      aclrtFree(p);
    }
    void* null_alloc(ssize_t size, int device, aclrtStream stream) {
      (void)size; (void)device; (void)stream;
      return NULL;
    }
    void reset_peak(signed char device) { (void)device; resets++; }
    void init(int device_count) { inits = device_count; }
    long alloc_count(void) { return allocs; }
    long free_count(void) { return frees; }
    long outstanding_bytes(void) { return bytes_out; }
    long reset_count(void) { return resets; }
    int init_arg(void) { return inits; }
    void clear_counts(void) { allocs = frees = bytes_out = resets = 0; }
    """
)


@pytest.fixture(scope="module", name="so_path")
def _so_path(tmp_path_factory):
    d = tmp_path_factory.mktemp("pluggable")
    (d / "alloc.c").write_text(ALLOCATOR_C)
    out = d / "liballoc.so"
    subprocess.run(
        ["cc", "-shared", "-fPIC", "-O1", str(d / "alloc.c"), "-o", str(out),
         f"-I{PKG}/include/third_party/acl/inc", f"-L{PKG}/lib", "-lascendcl",
         f"-Wl,-rpath,{PKG}/lib"],
        check=True,
        # Under make sanitize the interpreter runs with the sanitizer runtimes
        # preloaded; the compiler need not.
        env={k: v for k, v in os.environ.items() if k != "LD_PRELOAD"},
    )
    return str(out)


@pytest.fixture(name="lib")
def _lib(so_path):
    lib = ctypes.CDLL(so_path)
    for name in ("alloc_count", "free_count", "outstanding_bytes", "reset_count"):
        getattr(lib, name).restype = ctypes.c_long
    lib.clear_counts()
    yield lib
    torch.npu.synchronize()
    torch.npu.empty_cache()


def test_mem_pool_segments_come_from_the_allocator_and_go_back(so_path, lib):
    alloc = NPUPluggableAllocator(so_path, "counting_alloc", "counting_free")
    pool = torch.npu.MemPool(alloc.allocator())
    assert pool.allocator is alloc.allocator()
    with torch.npu.use_mem_pool(pool):
        x = torch.arange(1 << 20, dtype=torch.float32, device="npu")  # 4 MiB: one 20 MiB segment
        y = x * 2
    assert lib.alloc_count() == 1 and lib.outstanding_bytes() == 20 << 20
    assert y[-1].item() == 2 * ((1 << 20) - 1)
    z = torch.empty(1024, device="npu")  # outside the pool: the runtime's memory
    assert lib.alloc_count() == 1
    assert len(pool.snapshot()) == 1
    del x, y, z
    torch.npu.empty_cache()
    assert lib.free_count() == 0  # the pool is still in use: its cache stays
    del pool
    torch.npu.empty_cache()
    assert (lib.alloc_count(), lib.free_count(), lib.outstanding_bytes()) == (1, 1, 0)


def test_pool_keeps_its_allocator_until_the_last_tensor_died(so_path, lib):
    alloc = NPUPluggableAllocator(so_path, "counting_alloc", "counting_free")
    pool = torch.npu.MemPool(alloc)  # the wrapper object is accepted too
    with torch.npu.use_mem_pool(pool):
        data = torch.ones(16, device="npu")
    del pool, alloc
    torch.npu.empty_cache()
    assert lib.free_count() == 0
    assert data.sum().item() == 16
    del data
    torch.npu.empty_cache()
    assert lib.alloc_count() == lib.free_count() == 1


def test_an_allocator_that_returns_null_is_out_of_memory(so_path, lib):
    alloc = NPUPluggableAllocator(so_path, "null_alloc", "counting_free")
    pool = torch.npu.MemPool(alloc.allocator())
    ooms = torch.npu.memory_stats()["num_ooms"]
    with torch.npu.use_mem_pool(pool):
        with pytest.raises(torch.OutOfMemoryError, match="NPU out of memory"):
            torch.empty(1024, device="npu")
    assert torch.npu.memory_stats()["num_ooms"] == ooms + 1
    assert lib.free_count() == 0
    assert torch.ones(4, device="npu").sum().item() == 4  # the device is still usable


def test_bad_arguments(so_path, tmp_path):
    with pytest.raises(AttributeError, match="has no function named 'no_such_fn'"):
        NPUPluggableAllocator(so_path, "no_such_fn", "counting_free")
    with pytest.raises(TypeError, match="non-empty str"):
        NPUPluggableAllocator(so_path, "counting_alloc", 7)
    with pytest.raises(OSError):
        NPUPluggableAllocator(str(tmp_path / "missing.so"), "a", "f")
    with pytest.raises(TypeError, match="path_to_so_file"):
        NPUPluggableAllocator(3, "a", "f")
    with pytest.raises(ValueError, match="address of the alloc function is 0"):
        torch_npu._C._npu_customAllocator(0, 1)
    with pytest.raises(TypeError, match="allocator must be"):
        torch.npu.MemPool("allocator")
    with pytest.raises(TypeError, match="use_on_oom must be a bool"):
        torch.npu.MemPool(use_on_oom=1)
    with pytest.raises(TypeError, match="expects an NPUPluggableAllocator"):
        torch.npu.change_current_allocator(torch_npu.npu.memory._get_current_allocator())
    alloc = NPUPluggableAllocator(so_path, "counting_alloc", "counting_free")
    with pytest.raises(ValueError, match="get_device_stats function is 0"):
        alloc.allocator().set_get_device_stats_fn(0)


def test_no_swap_once_the_caching_allocator_served(so_path):
    torch.empty(1, device="npu")
    alloc = NPUPluggableAllocator(so_path, "counting_alloc", "counting_free")
    with pytest.raises(RuntimeError, match="Can't swap an already initialized allocator"):
        torch.npu.change_current_allocator(alloc)
    assert torch_npu.npu.memory._get_current_allocator().allocator() is None
    assert torch.npu.get_allocator_backend() == "native"


def test_current_allocator_serves_every_tensor(so_path):
    p = run_py(
        f"""
        import ctypes
        import torch, torch_npu
        lib = ctypes.CDLL({so_path!r})
        lib.outstanding_bytes.restype = ctypes.c_long
        alloc = torch.npu.NPUPluggableAllocator({so_path!r}, "counting_alloc", "counting_free")
        reset = ctypes.cast(lib.reset_peak, ctypes.c_void_p).value
        alloc.allocator().set_reset_peak_status_fn(reset)
        alloc.allocator().set_init_fn(ctypes.cast(lib.init, ctypes.c_void_p).value)
        torch.npu.change_current_allocator(alloc)
        print(lib.init_arg(), torch.npu.get_allocator_backend())
        x = torch.arange(1000, device="npu", dtype=torch.float32)
        y = (x + 1).sum()
        print(y.item(), lib.alloc_count() >= 3, lib.outstanding_bytes() > 0)
        p = torch.npu.caching_allocator_alloc(100)
        torch.npu.caching_allocator_delete(p)
        del x, y
        torch.npu.synchronize()
        print(lib.alloc_count() == lib.free_count(), lib.outstanding_bytes())
        torch.npu.reset_peak_memory_stats()
        print(lib.reset_count())
        print(torch.npu.memory_allocated())  # no statistics function: zero, with a warning
        try:
            with torch.npu.use_mem_pool(torch.npu.MemPool()):
                pass
        except RuntimeError as e:
            print("pool refused" if "give the allocator to a MemPool" in str(e) else e)
        try:
            torch.npu.change_current_allocator(alloc)
        except RuntimeError as e:
            print("Can't swap" in str(e))
        """
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.split("\n")[:-1] == [
        f"{torch.npu.device_count()} pluggable", "500500.0 True True", "True 0", "1", "0",
        "pool refused", "True"]
    assert "set_get_device_stats_fn" in p.stderr


def test_current_allocator_returning_null_raises_out_of_memory(so_path):
    p = run_py(
        f"""
        import torch, torch_npu
        alloc = torch.npu.NPUPluggableAllocator({so_path!r}, "null_alloc", "counting_free")
        torch.npu.change_current_allocator(alloc)
        try:
            torch.empty(10, device="npu")
        except torch.OutOfMemoryError as e:
            print(e)
        """
    )
    assert p.returncode == 0, p.stderr
    assert "alloc function returned NULL" in p.stdout and "Tried to allocate 40 bytes" in p.stdout
