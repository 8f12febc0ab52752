// Tests for HostBlock: ownership, alignment, moves, and the page-locked fallback.
#include "data_pipeline/host_block.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <utility>

namespace data_pipeline {
namespace {

TEST(HostBlockTest, PageableBlockIsAlignedZeroedAndWritable) {
  HostBlock b(10000, false);
  ASSERT_NE(b.data(), nullptr);
  EXPECT_EQ(b.size(), 10000u);
  EXPECT_FALSE(b.page_locked());
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.data()) % 4096, 0u);
  auto* p = static_cast<unsigned char*>(b.data());
  for (int i = 0; i < 10000; ++i) ASSERT_EQ(p[i], 0);
  std::memset(p, 0xAB, 10000);
}

TEST(HostBlockTest, MoveTransfersOwnership) {
  HostBlock a(4096, false);
  void* p = a.data();
  HostBlock b(std::move(a));
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(a.size(), 0u);
  EXPECT_EQ(b.data(), p);
  HostBlock c;
  c = std::move(b);
  EXPECT_EQ(c.data(), p);
  EXPECT_EQ(b.data(), nullptr);
}

TEST(HostBlockTest, PageLockedRequestFallsBackWithoutCuda) {
  HostBlock b(8192, true);
  ASSERT_NE(b.data(), nullptr);
  EXPECT_EQ(b.page_locked(), HostBlock::page_locking_available());
}

TEST(HostBlockTest, RefusesMoreThanThePhysicalMemory) {
  const std::size_t ram = HostBlock::physical_memory();
  ASSERT_GT(ram, 0u);
  try {
    HostBlock b(ram, false);
    FAIL() << "expected a refusal";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("GiB of host memory"), std::string::npos) << e.what();
  }
}

TEST(HostBlockTest, ZeroBytesIsEmpty) {
  HostBlock b(0, false);
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_EQ(b.size(), 0u);
}

}  // namespace
}  // namespace data_pipeline
