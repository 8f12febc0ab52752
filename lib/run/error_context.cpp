// A failure put in context (lib/run/error_context.h).
#include "lib/run/error_context.h"

#include <c10/util/Exception.h>

#include <stdexcept>

#include "data_pipeline/data_error.h"

namespace workload {

void rethrow_in_context(const std::string& phase, const std::string& where, DataErrorContext data) {
  try {
    throw;
  } catch (const data_pipeline::DataError& e) {
    if (data == DataErrorContext::kKeep) throw;
    throw data_pipeline::DataError(where + ": " + e.what());
  } catch (const c10::Error& e) {
    throw std::runtime_error(phase + " of " + where + ": " + e.what_without_backtrace());
  } catch (const std::exception& e) {
    throw std::runtime_error(phase + " of " + where + ": " + e.what());
  }
}

}  // namespace workload
