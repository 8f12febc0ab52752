// What an --epochs run's checkpoint holds (lib/run/checkpoint_state.h).
#include "lib/run/checkpoint_state.h"

#include <c10/util/StringUtil.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <utility>

#include "common/hash64.h"
#include "lib/report/report.h"

namespace workload {

namespace dp = data_pipeline;
namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

namespace {

constexpr const char* kParam = "param/";
constexpr const char* kBuffer = "buffer/";
constexpr const char* kMomentum = "momentum/";

// The checkpoint's tensors by name, each checked against the model's before it is used.
class SavedTensors {
 public:
  SavedTensors(const Checkpoint& c, std::string path) : path_(std::move(path)) {
    for (const auto& [name, t] : c.tensors) by_name_.emplace(name, t);
  }
  // `name`'s tensor, checked against `like`'s shape and type; undefined when absent and
  // `optional`.
  torch::Tensor take(const std::string& name, const torch::Tensor& like, bool optional = false) {
    const auto it = by_name_.find(name);
    if (it == by_name_.end()) {
      if (optional) return {};
      throw CheckpointError("checkpoint " + path_ + ": no tensor " + name);
    }
    if (it->second.sizes() != like.sizes() || it->second.scalar_type() != like.scalar_type()) {
      throw CheckpointError("checkpoint " + path_ + ": tensor " + name + " is " +
                            c10::str(it->second.scalar_type(), it->second.sizes()) +
                            ", the model's " + c10::str(like.scalar_type(), like.sizes()));
    }
    return it->second;
  }

 private:
  std::string path_;
  std::map<std::string, torch::Tensor> by_name_;
};

// The split's images (paths below the dataset, labels, sizes) as one hex digest.
std::string split_digest(const dp::Food101Index& index) {
  std::uint64_t h = 0;
  std::error_code ec;
  for (const dp::Sample& s : index.samples()) {
    const std::string rel = s.path.lexically_relative(index.dataset_dir()).generic_string();
    const auto size = static_cast<std::uint64_t>(fs::file_size(s.path, ec));
    h = common::hash64(rel.data(), rel.size(), h);
    h = common::hash64(&s.label, sizeof(s.label), h);
    h = common::hash64(&size, sizeof(size), h);
  }
  char out[17];
  std::snprintf(out, sizeof(out), "%016llx", static_cast<unsigned long long>(h));
  return out;
}

}  // namespace

Json run_fingerprint(const TrainConfig& config, const LrPlan& plan, std::int64_t classes,
                     const dp::Food101Index* split, int world_size) {
  Json f;
  f["model"] = "resnet50";
  f["classes"] = classes;
  f["train_images"] = split ? split->size() : 0;
  f["precision"] = to_string(config.precision);
  f["memory_format"] = to_string(config.loader.transform.layout);
  f["world_size"] = world_size;
  f["batch_size"] = config.loader.batch_size;
  f["image_size"] = config.loader.transform.image_size;
  f["seed"] = config.loader.seed;
  f["optimizer_steps"] = plan.options.total_steps;
  f["lr_schedule"] = to_string(plan.options.kind);
  f["peak_lr"] = plan.options.peak_lr;
  f["lr_warmup_steps"] = plan.options.warmup_steps;
  f["momentum"] = config.momentum;
  f["weight_decay"] = config.weight_decay;
  f["label_smoothing"] = config.label_smoothing;
  if (!config.checkpoint_dir.empty() && split) f["train_split"] = split_digest(*split);
  return f;
}

Checkpoint make_checkpoint(const Json& fingerprint, std::int64_t epochs_done,
                           const std::vector<EpochRecord>& epochs, double elapsed_s,
                           const torch::nn::Module& model, const ForeachSgd::State& optimizer,
                           const LossScaler::State* scaler) {
  Checkpoint c;
  c.meta["format"] = "train_resnet50 checkpoint";
  c.meta["fingerprint"] = fingerprint;
  c.meta["epochs_done"] = epochs_done;
  c.meta["optimizer_steps_done"] = optimizer.steps;
  c.meta["elapsed_s"] = elapsed_s;
  if (scaler != nullptr) {
    c.meta["loss_scaler"] = {{"scale", scaler->scale},
                             {"growth_tracker", scaler->growth_tracker},
                             {"skipped_steps", scaler->skipped_steps}};
  }
  Json records = Json::array();
  for (const EpochRecord& e : epochs) records.push_back(epoch_json(e));
  c.meta["epochs"] = records;
  const auto params = model.named_parameters();
  for (const auto& p : params) c.tensors.emplace_back(kParam + p.key(), p.value());
  for (const auto& b : model.named_buffers()) c.tensors.emplace_back(kBuffer + b.key(), b.value());
  for (std::size_t i = 0; i < params.size() && i < optimizer.momentum.size(); ++i) {
    if (optimizer.momentum[i].defined()) {
      c.tensors.emplace_back(kMomentum + params[i].key(), optimizer.momentum[i]);
    }
  }
  return c;
}

void restore_model(const Checkpoint& checkpoint, const std::string& path,
                   torch::nn::Module& model) {
  SavedTensors saved(checkpoint, path);
  torch::NoGradGuard no_grad;
  for (const auto& p : model.named_parameters()) {
    p.value().copy_(saved.take(kParam + p.key(), p.value()));
  }
  for (const auto& b : model.named_buffers()) {
    b.value().copy_(saved.take(kBuffer + b.key(), b.value()));
  }
}

void restore_optimizer(const Checkpoint& checkpoint, const std::string& path,
                       const torch::nn::Module& model, ForeachSgd& optimizer) {
  SavedTensors saved(checkpoint, path);
  ForeachSgd::State state;
  for (const auto& p : model.named_parameters()) {
    state.momentum.push_back(saved.take(kMomentum + p.key(), p.value(), /*optional=*/true));
  }
  state.steps = checkpoint.meta.value("optimizer_steps_done", std::int64_t{0});
  try {
    optimizer.load_state(state);
  } catch (const std::invalid_argument& e) {
    throw CheckpointError("checkpoint " + path + ": " + e.what());
  }
}

void restore_scaler(const Checkpoint& checkpoint, const std::string& path, LossScaler& scaler) {
  const auto it = checkpoint.meta.find("loss_scaler");
  if (it == checkpoint.meta.end() || !it->is_object()) {
    throw CheckpointError("checkpoint " + path +
                          ": no loss scaling state (loss_scaler) for an fp16 run");
  }
  LossScaler::State state;
  try {
    state.scale = it->at("scale").get<double>();
    state.growth_tracker = it->at("growth_tracker").get<std::int64_t>();
    state.skipped_steps = it->at("skipped_steps").get<std::int64_t>();
    scaler.load(state);
  } catch (const std::exception& e) {
    throw CheckpointError("checkpoint " + path + ": loss_scaler: " + e.what());
  }
}

std::vector<EpochRecord> resumed_epochs(const Checkpoint& checkpoint) {
  std::vector<EpochRecord> out;
  const auto it = checkpoint.meta.find("epochs");
  if (it == checkpoint.meta.end() || !it->is_array()) return out;
  for (const Json& e : *it) {
    EpochRecord rec = epoch_from_json(e);
    rec.resumed = true;
    out.push_back(rec);
  }
  return out;
}

}  // namespace workload
