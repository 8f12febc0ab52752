// Tests for rethrow_in_context: a failure named with its phase and step, c10's backtrace left out,
// bad data kept as bad data (named as the caller asks), anything else passed through.
#include "lib/run/error_context.h"

#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "data_pipeline/data_error.h"

namespace workload {
namespace {

// What escapes rethrow_in_context while `thrown` is handled.
template <class Thrown>
std::exception_ptr rethrown(const Thrown& thrown, DataErrorContext data) {
  try {
    try {
      throw thrown;
    } catch (...) {
      rethrow_in_context("forward", "captured step 3", data);
    }
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

std::string message(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    return ex.what();
  } catch (...) {
  }
  return "(not a std::exception)";
}

TEST(ErrorContextTest, AFailureIsNamedWithItsPhaseAndStep) {
  const std::exception_ptr e =
      rethrown(std::invalid_argument("shape mismatch"), DataErrorContext::kKeep);
  EXPECT_EQ(message(e), "forward of captured step 3: shape mismatch");
  EXPECT_THROW(std::rethrow_exception(e), std::runtime_error);
}

TEST(ErrorContextTest, ALibTorchErrorLosesItsBacktrace) {
  std::string what;
  try {
    TORCH_CHECK(false, "CUDA out of memory");
  } catch (const c10::Error& c) {
    what = message(rethrown(c, DataErrorContext::kKeep));
    EXPECT_NE(std::string(c.what()), c.what_without_backtrace());
  }
  EXPECT_EQ(what.rfind("forward of captured step 3: CUDA out of memory", 0), 0u) << what;
  EXPECT_EQ(what.find("frame #"), std::string::npos) << what;
}

TEST(ErrorContextTest, BadDataStaysBadDataNamedAsAsked) {
  const data_pipeline::DataError bad("images/a.jpg: not a JPEG");
  const std::exception_ptr kept = rethrown(bad, DataErrorContext::kKeep);
  EXPECT_THROW(std::rethrow_exception(kept), data_pipeline::DataError);
  EXPECT_EQ(message(kept), "images/a.jpg: not a JPEG");
  const std::exception_ptr prefixed = rethrown(bad, DataErrorContext::kPrefixWhere);
  EXPECT_THROW(std::rethrow_exception(prefixed), data_pipeline::DataError);
  EXPECT_EQ(message(prefixed), "captured step 3: images/a.jpg: not a JPEG");
}

TEST(ErrorContextTest, AnythingElsePassesThrough) {
  const std::exception_ptr e = rethrown(42, DataErrorContext::kKeep);
  try {
    std::rethrow_exception(e);
  } catch (int v) {
    EXPECT_EQ(v, 42);
    return;
  } catch (...) {
  }
  ADD_FAILURE() << "the int did not pass through";
}

}  // namespace
}  // namespace workload
