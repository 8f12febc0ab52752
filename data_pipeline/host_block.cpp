// An owned block of host memory, page-locked (CUDA) or pageable.
#include "data_pipeline/host_block.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <utility>

#include "common/cuda_check.h"

namespace data_pipeline {

namespace {
constexpr std::size_t kPage = 4096;
std::atomic<std::size_t> g_allocations{0};
}  // namespace

std::size_t HostBlock::allocations() { return g_allocations.load(); }

bool HostBlock::page_locking_available() {
#if defined(WORKLOAD_TORCH_CUDA)
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no device" error
    return false;
  }
  return count > 0;
#else
  return false;
#endif
}

std::size_t HostBlock::physical_memory() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<std::size_t>(pages) * static_cast<std::size_t>(page)
                               : 0;
}

HostBlock::HostBlock(std::size_t bytes, bool page_locked) : size_(bytes) {
  if (bytes == 0) return;
  // Refuse what cannot fit instead of letting the first touch summon the OOM killer.
  const std::size_t ram = physical_memory();
  if (ram > 0 && bytes > ram / 10 * 8) {
    char msg[256];
    std::snprintf(msg, sizeof(msg),
                  "cannot allocate %.1f GiB of host memory: more than 80%% of this machine's "
                  "%.1f GiB",
                  static_cast<double>(bytes) / 1073741824.0,
                  static_cast<double>(ram) / 1073741824.0);
    throw std::runtime_error(msg);
  }
#if defined(WORKLOAD_TORCH_CUDA)
  if (page_locked && page_locking_available()) {
    WORKLOAD_CUDA_CHECK(cudaHostAlloc(&data_, bytes, cudaHostAllocDefault));
    page_locked_ = true;
    ++g_allocations;
    return;
  }
#else
  (void)page_locked;
#endif
  const std::size_t rounded = (bytes + kPage - 1) / kPage * kPage;
  data_ = std::aligned_alloc(kPage, rounded);
  if (!data_) throw std::bad_alloc();
  std::memset(data_, 0, rounded);  // commit every page now, not in the first epoch
  ++g_allocations;
}

HostBlock::~HostBlock() { release(); }

HostBlock::HostBlock(HostBlock&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      page_locked_(std::exchange(other.page_locked_, false)) {}

HostBlock& HostBlock::operator=(HostBlock&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    page_locked_ = std::exchange(other.page_locked_, false);
  }
  return *this;
}

void HostBlock::release() noexcept {
  if (!data_) return;
#if defined(WORKLOAD_TORCH_CUDA)
  if (page_locked_) {
    WORKLOAD_CUDA_CHECK_NOTHROW(cudaFreeHost(data_));
    data_ = nullptr;
    return;
  }
#endif
  std::free(data_);
  data_ = nullptr;
}

}  // namespace data_pipeline
