// Food-101 dataset index: parsing of meta/classes.txt and meta/<split>.txt with file:line errors.
#include "data_pipeline/food101_index.h"

#include <cstdint>
#include <limits>
#include <system_error>
#include <unordered_map>
#include <utility>

#include "data_pipeline/data_error.h"
#include "data_pipeline/sample_transform.h"

namespace data_pipeline {
namespace fs = std::filesystem;

namespace {

std::string trim(const std::string& s) {
  const char* ws = " \t\r\n\v\f";
  const auto b = s.find_first_not_of(ws);
  if (b == std::string::npos) return {};
  const auto e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

struct NumberedLine {
  int line;  // 1-based
  std::string text;
};

// The most a split or class list holds: Food-101's train.txt is 1.5 MB; a larger file is no list,
// and is refused before it is read.
constexpr std::uint64_t kMaxListBytes = std::uint64_t{256} << 20;

// Non-blank lines of a text file, trimmed (handles CRLF and a missing final newline). Read with
// read_file, which refuses a FIFO or a device instead of blocking on it.
std::vector<NumberedLine> read_lines(const fs::path& file) {
  std::error_code ec;
  const auto st = fs::status(file, ec);
  if (ec || !fs::exists(st)) throw DataError(file.string() + ": file not found");
  if (fs::is_directory(st)) throw DataError(file.string() + ": expected a file, got a directory");
  if (fs::is_regular_file(st)) {
    const std::uint64_t size = fs::file_size(file, ec);
    if (!ec && size > kMaxListBytes) {
      throw DataError(file.string() + ": " + std::to_string(size) + " bytes, more than the " +
                      std::to_string(kMaxListBytes) + " a split or class list holds");
    }
  }
  std::vector<std::uint8_t> bytes;
  read_file(file.string(), bytes, std::numeric_limits<std::uint64_t>::max());
  const std::string text(bytes.begin(), bytes.end());
  std::vector<NumberedLine> out;
  int number = 0;
  for (std::size_t at = 0; at < text.size();) {
    std::size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    ++number;
    std::string t = trim(text.substr(at, end - at));
    if (!t.empty()) out.push_back({number, std::move(t)});
    at = end + 1;
  }
  return out;
}

fs::path resolve_dataset_dir(const fs::path& root) {
  std::error_code ec;
  if (root.empty()) throw DataError("dataset root: expected a directory path, got an empty string");
  if (!fs::exists(root, ec)) throw DataError(root.string() + ": dataset root not found");
  if (!fs::is_directory(root, ec)) {
    throw DataError(root.string() + ": dataset root is not a directory");
  }
  if (const std::optional<fs::path> dir = find_dataset_dir(root)) return *dir;
  throw DataError(root.string() +
                  ": not a Food-101 layout (expected food-101/meta/ or meta/ inside it)");
}

}  // namespace

std::optional<fs::path> find_dataset_dir(const fs::path& root) {
  std::error_code ec;
  if (root.empty()) return std::nullopt;
  if (fs::is_directory(root / "food-101" / "meta", ec)) return root / "food-101";
  if (fs::is_directory(root / "meta", ec)) return root;
  return std::nullopt;
}

Food101Index::Food101Index(fs::path dataset_dir, std::string split,
                           std::vector<std::string> classes, std::vector<Sample> samples)
    : dataset_dir_(std::move(dataset_dir)),
      split_(std::move(split)),
      classes_(std::move(classes)),
      samples_(std::move(samples)) {
  for (const auto& s : samples_) {
    if (s.label < 0 || s.label >= static_cast<std::int64_t>(classes_.size())) {
      throw DataError(s.path.string() + ": label " + std::to_string(s.label) +
                      " out of range for " + std::to_string(classes_.size()) + " classes");
    }
  }
}

Food101Index Food101Index::load(const fs::path& root, const std::string& split) {
  if (split != "train" && split != "test") {
    throw DataError("split: expected 'train' or 'test', got '" + split + "'");
  }
  const fs::path dir = resolve_dataset_dir(root);
  const fs::path classes_file = dir / "meta" / "classes.txt";
  const fs::path split_file = dir / "meta" / (split + ".txt");

  std::vector<std::string> classes;
  std::unordered_map<std::string, std::int64_t> label_of;
  for (const auto& l : read_lines(classes_file)) {
    if (l.text.find('/') != std::string::npos) {
      throw DataError(classes_file.string() + ":" + std::to_string(l.line) +
                      ": class name must not contain '/', got '" + l.text + "'");
    }
    auto [it, inserted] = label_of.emplace(l.text, static_cast<std::int64_t>(classes.size()));
    if (!inserted) {
      throw DataError(classes_file.string() + ":" + std::to_string(l.line) + ": duplicate class '" +
                      l.text + "'");
    }
    classes.push_back(l.text);
  }
  if (classes.empty()) throw DataError(classes_file.string() + ": no classes listed");

  std::vector<Sample> samples;
  const fs::path images = dir / "images";
  for (const auto& l : read_lines(split_file)) {
    const std::string where = split_file.string() + ":" + std::to_string(l.line);
    const auto slash = l.text.find('/');
    if (slash == std::string::npos || slash == 0 || slash + 1 == l.text.size()) {
      throw DataError(where + ": expected '<class>/<image id>', got '" + l.text + "'");
    }
    const std::string cls = l.text.substr(0, slash);
    const auto found = label_of.find(cls);
    if (found == label_of.end()) {
      // NOLINTNEXTLINE(performance-inefficient-string-concatenation): a throw's message
      throw DataError(where + ": unknown class '" + cls + "' (not in " + classes_file.string() +
                      ")");
    }
    fs::path file = images / (l.text + ".jpg");
    std::error_code ec;
    const auto st = fs::status(file, ec);
    if (!fs::exists(st)) throw DataError(where + ": image not found: " + file.string());
    if (fs::is_directory(st)) {
      throw DataError(where + ": expected an image file, got a directory: " + file.string());
    }
    if (!fs::is_regular_file(st)) {
      throw DataError(where + ": not a regular file: " + file.string());
    }
    samples.push_back({std::move(file), found->second});
  }
  if (samples.empty()) {
    throw DataError(split_file.string() + ": split '" + split + "' lists no images");
  }
  return Food101Index(dir, split, std::move(classes), std::move(samples));
}

}  // namespace data_pipeline
