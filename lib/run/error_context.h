// A failure put in context: which phase of which step (or evaluation) it happened in, for the
// step run, the epoch run and the evaluation alike (lib/run/trainer.h).
#pragma once

#include <string>

namespace workload {

/// How a data_pipeline::DataError (bad data, whose message names its file) is rethrown.
enum class DataErrorContext {
  kKeep,        ///< as it is: the file it names is context enough
  kPrefixWhere  ///< as a DataError whose message starts with "<where>: "
};

/// Called inside a catch block: rethrows the exception being handled with its context. A
/// c10::Error or another std::exception becomes a std::runtime_error "<phase> of <where>: <what>"
/// (c10's message without its C++ backtrace); a DataError is rethrown as `data` says; anything
/// else unchanged. data_pipeline::Cancelled, a stop rather than a failure, is the caller's to catch
/// first. Example: rethrow_in_context("forward", "captured step 3", DataErrorContext::kKeep).
[[noreturn]] void rethrow_in_context(const std::string& phase, const std::string& where,
                                     DataErrorContext data);

}  // namespace workload
