// The exception type for defects in user-supplied data (dataset layout, meta files, image bytes).
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

}  // namespace data_pipeline
