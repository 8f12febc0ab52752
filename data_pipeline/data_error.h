// Exception types of data_pipeline: defects in user-supplied data, and cancellation.
#pragma once

#include <stdexcept>
#include <string>

namespace data_pipeline {

/// Thrown for any defect in user-supplied data. The message always names the file (and line, where
/// there is one), so `main` can print it as is and exit with status 1.
class DataError : public std::runtime_error {
 public:
  explicit DataError(const std::string& what) : std::runtime_error(what) {}
};

/// Thrown by Loader::next() after Loader::cancel(): the consumer asked to stop (e.g. on SIGINT).
class Cancelled : public std::runtime_error {
 public:
  Cancelled() : std::runtime_error("loader cancelled") {}
};

}  // namespace data_pipeline
