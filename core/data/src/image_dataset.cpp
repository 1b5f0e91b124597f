#include "ddph/data/image_dataset.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <system_error>

#include "ddph/common/error.h"

namespace ddph::data {

using common::Error;

namespace fs = std::filesystem;
namespace {

constexpr std::uint32_t kIdxImagesMagic = 0x00000803;  // unsigned byte, 3 dimensions
constexpr std::uint32_t kIdxLabelsMagic = 0x00000801;  // unsigned byte, 1 dimension
constexpr std::int64_t kIdxImagesHeader = 16;
constexpr std::int64_t kIdxLabelsHeader = 8;
constexpr int kMnistSide = 28;
constexpr int kNumClasses = 10;
constexpr ImageShape kCifarShape{3, 32, 32};
constexpr std::int64_t kCifarRecord = 1 + 3 * 32 * 32;  // label byte + channel-major pixels

std::string pathOf(const fs::path& p) { return p.string(); }

// The whole file. A missing or unreadable file is a ConfigError naming it.
std::vector<std::uint8_t> readWholeFile(const fs::path& file) {
  std::error_code ec;
  const auto status = fs::status(file, ec);
  DDPH_CHECK(fs::exists(status), "{}: missing (no such file)", pathOf(file));
  DDPH_CHECK(fs::is_regular_file(status), "{}: not a regular file", pathOf(file));
  std::ifstream in(file, std::ios::binary);
  DDPH_CHECK(in.good(), "{}: cannot open for reading: {}", pathOf(file), std::strerror(errno));
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  in.seekg(0, std::ios::beg);
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(size));
  if (size > 0) in.read(reinterpret_cast<char*>(bytes.data()), size);
  DDPH_CHECK(in.good() || (size == 0), "{}: read error after {} of {} bytes", pathOf(file),
             static_cast<std::int64_t>(in.gcount()), static_cast<std::int64_t>(size));
  return bytes;
}

std::uint32_t readBigEndian32(const std::vector<std::uint8_t>& bytes, std::size_t offset) {
  return (std::uint32_t{bytes[offset]} << 24) | (std::uint32_t{bytes[offset + 1]} << 16) |
         (std::uint32_t{bytes[offset + 2]} << 8) | std::uint32_t{bytes[offset + 3]};
}

void appendBigEndian32(std::vector<std::uint8_t>& out, std::uint32_t value) {
  out.push_back(static_cast<std::uint8_t>(value >> 24));
  out.push_back(static_cast<std::uint8_t>(value >> 16));
  out.push_back(static_cast<std::uint8_t>(value >> 8));
  out.push_back(static_cast<std::uint8_t>(value));
}

// Exact size: a short file is truncated, a long one has trailing bytes; both are errors (a file
// cut by an interrupted download, or the wrong file under the right name).
void checkExactSize(const fs::path& file, std::int64_t expected, std::int64_t got,
                    const char* what) {
  DDPH_CHECK(got >= expected, "{}: truncated: expected {} bytes ({}), got {}", pathOf(file),
             expected, what, got);
  DDPH_CHECK(got == expected, "{}: oversized: expected {} bytes ({}), got {} ({} trailing bytes)",
             pathOf(file), expected, what, got, got - expected);
}

void checkMagic(const fs::path& file, const std::vector<std::uint8_t>& bytes, std::int64_t header,
                std::uint32_t expected, const char* what) {
  // The magic number first: the wrong kind of file (labels for images, a .gz) is named as such
  // even when it is also shorter than the header.
  const auto size = static_cast<std::int64_t>(bytes.size());
  if (size >= 4) {
    const std::uint32_t magic = readBigEndian32(bytes, 0);
    DDPH_CHECK(magic == expected, "{}: bad magic number 0x{:08x}, expected 0x{:08x} ({})",
               pathOf(file), magic, expected, what);
  }
  DDPH_CHECK(size >= header, "{}: truncated: expected at least {} bytes ({} header), got {}",
             pathOf(file), header, what, size);
}

void checkLabels(const fs::path& file, const std::vector<std::uint8_t>& labels, int numClasses) {
  for (std::size_t i = 0; i < labels.size(); ++i) {
    DDPH_CHECK(labels[i] < numClasses, "{}: label {} at index {} out of range [0, {})",
               pathOf(file), int{labels[i]}, i, numClasses);
  }
}

struct MnistFiles {
  const char* images;
  const char* labels;
};

MnistFiles mnistFiles(Split split) {
  if (split == Split::kTrain) return {"train-images-idx3-ubyte", "train-labels-idx1-ubyte"};
  return {"t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
}

void checkDirectory(const fs::path& dir, const char* what) {
  std::error_code ec;
  const auto status = fs::status(dir, ec);
  DDPH_CHECK(fs::exists(status), "{}: missing: no such directory (expected {})", pathOf(dir), what);
  DDPH_CHECK(fs::is_directory(status), "{}: not a directory (expected {})", pathOf(dir), what);
}

// Writes `bytes` to `<file>.tmp.<pid>`; the caller renames it. Removes the temp file on failure.
fs::path writeTemp(const fs::path& file, const std::vector<std::uint8_t>& bytes) {
  fs::path temp = file;
  temp += ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (out.good()) {
      out.write(reinterpret_cast<const char*>(bytes.data()),
                static_cast<std::streamsize>(bytes.size()));
      out.flush();
    }
    if (out.good()) return temp;
  }
  const int saved = errno;
  std::error_code ec;
  fs::remove(temp, ec);
  throw Error(
      fmt::format("{}: cannot write {}: {}", pathOf(file), pathOf(temp), std::strerror(saved)));
}

// Renames every temp file onto its target; on a failure removes the temps not yet renamed.
void commitTemps(const std::vector<std::pair<fs::path, fs::path>>& tempsAndTargets) {
  for (std::size_t i = 0; i < tempsAndTargets.size(); ++i) {
    std::error_code ec;
    fs::rename(tempsAndTargets[i].first, tempsAndTargets[i].second, ec);
    if (ec) {
      for (std::size_t j = i; j < tempsAndTargets.size(); ++j) {
        std::error_code ignored;
        fs::remove(tempsAndTargets[j].first, ignored);
      }
      throw Error(fmt::format("{}: cannot rename {} onto it: {}", pathOf(tempsAndTargets[i].second),
                              pathOf(tempsAndTargets[i].first), ec.message()));
    }
  }
}

void checkWritable(const ImageDataset& dataset) {
  const auto features = dataset.shape.features();
  DDPH_CHECK(features > 0, "dataset '{}': shape {}x{}x{} has no pixels", dataset.name,
             dataset.shape.channels, dataset.shape.height, dataset.shape.width);
  DDPH_CHECK(static_cast<std::int64_t>(dataset.pixels.size()) == dataset.size() * features,
             "dataset '{}': {} pixel bytes for {} samples of {} features (expected {})",
             dataset.name, dataset.pixels.size(), dataset.size(), features,
             dataset.size() * features);
  DDPH_CHECK(dataset.numClasses > 0 && dataset.numClasses <= 256,
             "dataset '{}': {} classes do not fit in a label byte", dataset.name,
             dataset.numClasses);
  for (std::size_t i = 0; i < dataset.labels.size(); ++i) {
    DDPH_CHECK(dataset.labels[i] < dataset.numClasses,
               "dataset '{}': label {} of sample {} out of range [0, {})", dataset.name,
               int{dataset.labels[i]}, i, dataset.numClasses);
  }
}

// NOTE [Synthetic PRNG]: splitmix64 (Steele, Lea, Flood 2014), written out here so that the bytes
// of a synthetic dataset depend only on (size, seed, split), not on a standard library's
// distributions. Each purpose (teacher, train pixels, test pixels) has its own stream: the seed
// mixed with a distinct constant.
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t state) : state_(state) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

 private:
  std::uint64_t state_;
};

constexpr std::uint64_t kTeacherStream = 0x7465616368657221ULL;  // "teacher!"
constexpr std::uint64_t kTrainStream = 0x747261696e2d2d2dULL;    // "train---"
constexpr std::uint64_t kTestStream = 0x746573742d2d2d2dULL;     // "test----"

std::uint64_t streamSeed(std::uint64_t seed, std::uint64_t stream) {
  // One splitmix step over seed ^ stream decorrelates neighbouring seeds and streams.
  return SplitMix64(seed ^ stream).next();
}

}  // namespace

std::vector<std::string> datasetNames() { return {"mnist", "cifar10", "synthetic"}; }

ImageDataset loadMnist(const fs::path& dir, Split split) {
  checkDirectory(dir, "MNIST's IDX files; run scripts/fetch-mnist.sh");
  const MnistFiles names = mnistFiles(split);
  const fs::path imagesFile = dir / names.images;
  const fs::path labelsFile = dir / names.labels;

  ImageDataset dataset;
  dataset.name = "mnist";
  dataset.shape = ImageShape{1, kMnistSide, kMnistSide};
  dataset.numClasses = kNumClasses;

  std::vector<std::uint8_t> images = readWholeFile(imagesFile);
  checkMagic(imagesFile, images, kIdxImagesHeader, kIdxImagesMagic, "IDX images");
  const std::uint32_t count = readBigEndian32(images, 4);
  const std::uint32_t rows = readBigEndian32(images, 8);
  const std::uint32_t cols = readBigEndian32(images, 12);
  DDPH_CHECK(rows == kMnistSide && cols == kMnistSide,
             "{}: wrong dimensions {}x{}x{}, expected Nx{}x{}", pathOf(imagesFile), count, rows,
             cols, kMnistSide, kMnistSide);
  const std::int64_t features = dataset.shape.features();
  checkExactSize(imagesFile, kIdxImagesHeader + std::int64_t{count} * features,
                 static_cast<std::int64_t>(images.size()),
                 fmt::format("16-byte header + {} images of {}x{}", count, rows, cols).c_str());

  std::vector<std::uint8_t> labels = readWholeFile(labelsFile);
  checkMagic(labelsFile, labels, kIdxLabelsHeader, kIdxLabelsMagic, "IDX labels");
  const std::uint32_t labelCount = readBigEndian32(labels, 4);
  checkExactSize(labelsFile, kIdxLabelsHeader + std::int64_t{labelCount},
                 static_cast<std::int64_t>(labels.size()),
                 fmt::format("8-byte header + {} labels", labelCount).c_str());
  DDPH_CHECK(labelCount == count, "{}: wrong dimensions: {} labels, but {} holds {} images",
             pathOf(labelsFile), labelCount, pathOf(imagesFile), count);

  dataset.pixels.assign(images.begin() + kIdxImagesHeader, images.end());
  dataset.labels.assign(labels.begin() + kIdxLabelsHeader, labels.end());
  checkLabels(labelsFile, dataset.labels, kNumClasses);
  return dataset;
}

ImageDataset loadCifar10(const fs::path& dir, Split split) {
  checkDirectory(dir, "CIFAR-10's binary batches data_batch_K.bin / test_batch.bin");
  std::vector<fs::path> files;
  if (split == Split::kTest) {
    files.push_back(dir / "test_batch.bin");
  } else {
    // data_batch_1.bin (required: the read below reports it missing), then data_batch_2.bin, …
    // while they exist. A gap before data_batch_5.bin is an error rather than a silently smaller
    // dataset.
    files.push_back(dir / "data_batch_1.bin");
    int k = 2;
    std::error_code ec;
    for (; fs::exists(dir / fmt::format("data_batch_{}.bin", k), ec); ++k) {
      files.push_back(dir / fmt::format("data_batch_{}.bin", k));
    }
    for (int later = k + 1; later <= 5; ++later) {
      const fs::path file = dir / fmt::format("data_batch_{}.bin", later);
      DDPH_CHECK(!fs::exists(file, ec),
                 "{}: missing, but {} exists (the train split reads "
                 "data_batch_1.bin, data_batch_2.bin, … up to the first missing one)",
                 pathOf(dir / fmt::format("data_batch_{}.bin", k)), pathOf(file));
    }
  }

  ImageDataset dataset;
  dataset.name = "cifar10";
  dataset.shape = kCifarShape;
  dataset.numClasses = kNumClasses;
  const std::int64_t features = kCifarShape.features();
  for (const fs::path& file : files) {
    const std::vector<std::uint8_t> bytes = readWholeFile(file);
    const auto size = static_cast<std::int64_t>(bytes.size());
    DDPH_CHECK(size > 0,
               "{}: empty (0 bytes); a CIFAR-10 batch holds records of {} bytes "
               "(1 label byte + 3072 pixel bytes)",
               pathOf(file), kCifarRecord);
    DDPH_CHECK(size % kCifarRecord == 0,
               "{}: record size not a multiple of {}: {} bytes hold {} whole "
               "records and a partial record of {} bytes (truncated?)",
               pathOf(file), kCifarRecord, size, size / kCifarRecord, size % kCifarRecord);
    const std::int64_t records = size / kCifarRecord;
    dataset.labels.reserve(dataset.labels.size() + static_cast<std::size_t>(records));
    dataset.pixels.reserve(dataset.pixels.size() + static_cast<std::size_t>(records * features));
    for (std::int64_t r = 0; r < records; ++r) {
      const auto* record = bytes.data() + r * kCifarRecord;
      DDPH_CHECK(record[0] < kNumClasses, "{}: label {} of record {} out of range [0, {})",
                 pathOf(file), int{record[0]}, r, kNumClasses);
      dataset.labels.push_back(record[0]);
      dataset.pixels.insert(dataset.pixels.end(), record + 1, record + kCifarRecord);
    }
  }
  return dataset;
}

ImageDataset makeSynthetic(std::int64_t size, std::uint64_t seed, Split split) {
  DDPH_CHECK(size >= 0, "synthetic dataset size must be non-negative, got {}", size);
  ImageDataset dataset;
  dataset.name = "synthetic";
  dataset.shape = ImageShape{1, kMnistSide, kMnistSide};
  dataset.numClasses = kNumClasses;
  const std::int64_t features = dataset.shape.features();

  // The teacher: one prototype image per class. A sample of class c is its prototype blended
  // with uniform noise, x = (prototype_c + noise) / 2, in integers (the same bytes on every
  // machine): far enough from the other classes to be learned in a few hundred steps, noisy
  // enough that it takes some.
  SplitMix64 teacherRng(streamSeed(seed, kTeacherStream));
  std::vector<std::uint8_t> prototypes(static_cast<std::size_t>(kNumClasses * features));
  for (auto& p : prototypes) p = static_cast<std::uint8_t>(teacherRng.next() >> 56);

  SplitMix64 rng(streamSeed(seed, split == Split::kTrain ? kTrainStream : kTestStream));
  dataset.pixels.resize(static_cast<std::size_t>(size * features));
  dataset.labels.resize(static_cast<std::size_t>(size));
  for (std::int64_t i = 0; i < size; ++i) {
    const auto label = static_cast<int>(rng.next() % kNumClasses);
    const std::uint8_t* prototype = prototypes.data() + label * features;
    std::uint8_t* x = dataset.pixels.data() + i * features;
    for (std::int64_t f = 0; f < features; f += 8) {
      std::uint64_t bits = rng.next();
      for (std::int64_t b = 0; b < 8 && f + b < features; ++b, bits >>= 8) {
        const int noise = static_cast<int>(bits & 0xff);
        x[f + b] = static_cast<std::uint8_t>((int{prototype[f + b]} + noise) / 2);
      }
    }
    dataset.labels[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(label);
  }
  return dataset;
}

void writeCifar10Batch(const fs::path& file, const ImageDataset& dataset) {
  checkWritable(dataset);
  DDPH_CHECK(dataset.shape == kCifarShape,
             "{}: dataset '{}' has shape {}x{}x{}, a CIFAR-10 batch holds 3x32x32", pathOf(file),
             dataset.name, dataset.shape.channels, dataset.shape.height, dataset.shape.width);
  const std::int64_t features = kCifarShape.features();
  std::vector<std::uint8_t> bytes;
  bytes.reserve(static_cast<std::size_t>(dataset.size() * kCifarRecord));
  for (std::int64_t i = 0; i < dataset.size(); ++i) {
    bytes.push_back(dataset.labels[static_cast<std::size_t>(i)]);
    const auto* x = dataset.pixels.data() + i * features;
    bytes.insert(bytes.end(), x, x + features);
  }
  commitTemps({{writeTemp(file, bytes), file}});
}

void writeMnistIdx(const fs::path& imagesFile, const fs::path& labelsFile,
                   const ImageDataset& dataset) {
  checkWritable(dataset);
  DDPH_CHECK(dataset.shape.channels == 1,
             "{}: dataset '{}' has {} channels, an IDX images file holds 1", pathOf(imagesFile),
             dataset.name, dataset.shape.channels);
  const auto count = static_cast<std::uint32_t>(dataset.size());
  DDPH_CHECK(static_cast<std::int64_t>(count) == dataset.size(),
             "{}: {} samples do not fit an IDX header", pathOf(imagesFile), dataset.size());
  std::vector<std::uint8_t> images;
  images.reserve(static_cast<std::size_t>(kIdxImagesHeader) + dataset.pixels.size());
  appendBigEndian32(images, kIdxImagesMagic);
  appendBigEndian32(images, count);
  appendBigEndian32(images, static_cast<std::uint32_t>(dataset.shape.height));
  appendBigEndian32(images, static_cast<std::uint32_t>(dataset.shape.width));
  images.insert(images.end(), dataset.pixels.begin(), dataset.pixels.end());
  std::vector<std::uint8_t> labels;
  labels.reserve(static_cast<std::size_t>(kIdxLabelsHeader) + dataset.labels.size());
  appendBigEndian32(labels, kIdxLabelsMagic);
  appendBigEndian32(labels, count);
  labels.insert(labels.end(), dataset.labels.begin(), dataset.labels.end());

  const fs::path imagesTemp = writeTemp(imagesFile, images);
  fs::path labelsTemp;
  try {
    labelsTemp = writeTemp(labelsFile, labels);
  } catch (...) {
    std::error_code ec;
    fs::remove(imagesTemp, ec);
    throw;
  }
  commitTemps({{imagesTemp, imagesFile}, {labelsTemp, labelsFile}});
}

}  // namespace ddph::data
