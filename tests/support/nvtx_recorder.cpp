// An NVTX injection library for tests: records every push/pop and thread name to a file.
//
// Load it with NVTX_INJECTION64_PATH=<path to libnvtx_recorder.so> and name the output file with
// NVTX_RECORDER_OUTPUT ("%r" in it becomes $RANK). Each event is one tab-separated line, appended
// as it happens (so a process that exits abruptly loses nothing):
//   <os thread id> \t push|pop|thread_name|domain \t <domain name, empty for the default domain> \t
//   <text>
// ("domain" records the creation of a named domain.)
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

#include <nvtx3/nvToolsExt.h>

namespace {

std::mutex g_mu;
int g_fd = -1;
std::unordered_map<const void*, std::string> g_domains;  // handle -> name
int g_next_domain = 1;

void emit(const char* op, const std::string& domain, const std::string& text) {
  const std::string line =
      std::to_string(::syscall(SYS_gettid)) + "\t" + op + "\t" + domain + "\t" + text + "\n";
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_fd >= 0) (void)!::write(g_fd, line.data(), line.size());
}

std::string domain_name(nvtxDomainHandle_t d) {
  if (!d) return {};
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_domains.find(d);
  return it == g_domains.end() ? "?" : it->second;
}

std::string message_of(const nvtxEventAttributes_t* a) {
  if (!a) return {};
  switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII:
      return a->message.ascii ? a->message.ascii : "";
    case NVTX_MESSAGE_TYPE_REGISTERED:
      return "<registered>";
    default:
      return "<unsupported message type>";
  }
}

int NVTX_API range_push_a(const char* message) {
  emit("push", "", message ? message : "");
  return 0;
}
int NVTX_API range_push_ex(const nvtxEventAttributes_t* a) {
  emit("push", "", message_of(a));
  return 0;
}
int NVTX_API range_pop() {
  emit("pop", "", "");
  return 0;
}
void NVTX_API name_os_thread_a(uint32_t tid, const char* name) {
  const std::string line = std::to_string(tid) + "\tthread_name\t\t" + (name ? name : "") + "\n";
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_fd >= 0) (void)!::write(g_fd, line.data(), line.size());
}
int NVTX_API domain_range_push_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  emit("push", domain_name(d), message_of(a));
  return 0;
}
int NVTX_API domain_range_pop(nvtxDomainHandle_t d) {
  emit("pop", domain_name(d), "");
  return 0;
}
nvtxDomainHandle_t NVTX_API domain_create_a(const char* name) {
  std::lock_guard<std::mutex> lock(g_mu);
  // Any unique non-null value serves as a handle; NVTX never dereferences it.
  auto* handle = reinterpret_cast<nvtxDomainHandle_t>(static_cast<std::uintptr_t>(g_next_domain++));
  g_domains[handle] = name ? name : "";
  const std::string line =
      std::to_string(::syscall(SYS_gettid)) + "\tdomain\t" + (name ? name : "") + "\t\n";
  if (g_fd >= 0) (void)!::write(g_fd, line.data(), line.size());
  return handle;
}

bool set(NvtxFunctionTable table, unsigned size, unsigned id, NvtxFunctionPointer fn) {
  if (id >= size || !table[id]) return false;
  *table[id] = fn;
  return true;
}

}  // namespace

extern "C" NVTX_DYNAMIC_EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_table) {
  const char* out = std::getenv("NVTX_RECORDER_OUTPUT");
  if (!out) return 0;
  // "%r" in the path becomes $RANK: one file per rank of a distributed run.
  std::string path(out);
  const char* rank = std::getenv("RANK");
  for (std::size_t at = path.find("%r"); at != std::string::npos; at = path.find("%r")) {
    path.replace(at, 2, rank ? rank : "0");
  }
  g_fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (g_fd < 0) return 0;
  const auto* callbacks =
      static_cast<const NvtxExportTableCallbacks*>(get_table(NVTX_ETID_CALLBACKS));
  if (!callbacks) return 0;
  NvtxFunctionTable core = nullptr, core2 = nullptr;
  unsigned core_size = 0, core2_size = 0;
  if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &core, &core_size)) return 0;
  if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &core2, &core2_size)) return 0;
  auto fp = [](auto f) { return reinterpret_cast<NvtxFunctionPointer>(f); };
  set(core, core_size, NVTX_CBID_CORE_RangePushA, fp(range_push_a));
  set(core, core_size, NVTX_CBID_CORE_RangePushEx, fp(range_push_ex));
  set(core, core_size, NVTX_CBID_CORE_RangePop, fp(range_pop));
  set(core, core_size, NVTX_CBID_CORE_NameOsThreadA, fp(name_os_thread_a));
  set(core2, core2_size, NVTX_CBID_CORE2_DomainRangePushEx, fp(domain_range_push_ex));
  set(core2, core2_size, NVTX_CBID_CORE2_DomainRangePop, fp(domain_range_pop));
  set(core2, core2_size, NVTX_CBID_CORE2_DomainCreateA, fp(domain_create_a));
  return 1;
}
