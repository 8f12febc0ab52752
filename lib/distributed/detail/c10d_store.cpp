// The c10d side of lib/distributed (lib/distributed/detail/c10d_store.h).
#include "lib/distributed/detail/c10d_store.h"

namespace workload::detail {

c10::intrusive_ptr<c10d::Store> connect_run_store(const LaunchEnv& env,
                                                  std::chrono::milliseconds timeout, bool serve) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(env.master_port);
  options.isServer = serve;
  options.numWorkers = static_cast<std::size_t>(env.world_size);
  options.waitWorkers = false;  // the join waits, naming who is missing
  options.timeout = timeout;
  auto tcp = c10::make_intrusive<c10d::TCPStore>(env.master_addr, options);
  auto store = c10::make_intrusive<c10d::PrefixStore>(
      "/worker/attempt_" + std::to_string(env.restart_count) + "/train_resnet50", tcp);
  store->setTimeout(timeout);
  return store;
}

std::int64_t C10dHeartbeatStore::add(const std::string& key, std::int64_t delta) {
  return store_->add(key, delta);
}

void C10dHeartbeatStore::set_once(const std::string& key, const std::string& value) {
  store_->compareSet(key, {}, bytes_of(value));  // from "" only: the first writer wins
}

std::optional<std::string> C10dHeartbeatStore::get_if_set(const std::string& key) {
  if (!store_->check({key})) return std::nullopt;
  return text_of(store_->get(key));
}

std::string what_of(const std::exception& e) {
  const auto* c10 = dynamic_cast<const c10::Error*>(&e);
  const std::string what = c10 ? c10->what_without_backtrace() : e.what();
  return what.substr(0, what.find('\n'));
}

std::string endpoint(const LaunchEnv& env) {
  return env.master_addr + ":" + std::to_string(env.master_port);
}

std::string text_of(const std::vector<std::uint8_t>& bytes) {
  return std::string(bytes.begin(), bytes.end());
}

std::vector<std::uint8_t> bytes_of(const std::string& text) {
  return std::vector<std::uint8_t>(text.begin(), text.end());
}

}  // namespace workload::detail
