// One DDP rank as a process (for the multiproc test): joins a world through a TCPStore that the
// test hosts on 127.0.0.1:PORT (--port/--rank/--world), or, without --port, the env:// way from
// RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (as set by `ddp-sim launch` or torchrun), trains its rank of the setup given on the command line with
// DistributedDataParallel over Gloo, and writes its final parameters (float64, raw) to --out
// atomically (temp file + rename). Exit 0 on success, 1 on a training/collective error, 2 on usage.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "ddph/comm/gloo_communicator.h"
#include "ddph/comm/rank_env.h"
#include "ddph/common/error.h"
#include "ddph/ddp/gradient_equivalence.h"
#include "support/kill_inside_allreduce.h"

int main(int argc, char** argv) {
  CLI::App app("ddp_rank_worker: one DDP rank of a gradient-equivalence setup");
  int port = 0, rank = 0, world = 1, batch = 2, steps = 2, timeoutMs = 30000;
  std::uint64_t seed = 1;
  std::string model = "mlp", optimizer = "adam", out, killReport;
  int inputs = 0, killStep = -1;
  std::vector<int> hidden{8, 5};
  app.add_option("--port", port, "TCPStore port on 127.0.0.1 (default: env:// variables)");
  app.add_option("--rank", rank);
  app.add_option("--world", world);
  app.add_option("--batch", batch);
  app.add_option("--steps", steps);
  app.add_option("--seed", seed);
  app.add_option("--model", model)->check(CLI::IsMember({"mlp", "conv"}));
  app.add_option("--optimizer", optimizer)->check(CLI::IsMember({"sgd", "adam"}));
  app.add_option("--timeout-ms", timeoutMs);
  app.add_option("--out", out)->required();
  app.add_option("--inputs", inputs, "MLP input features (default: the setup's)");
  app.add_option("--hidden", hidden, "hidden widths")->delimiter(',');
  app.add_option("--kill-inside-allreduce", killStep,
                 "SIGKILL this rank inside the first large (>= 1 MiB) gradient allreduce of this DDP step");
  app.add_option("--kill-report", killReport, "where the kill writes whether it landed inside");
  CLI11_PARSE(app, argc, argv);
  try {
    ddph::ddp::TrainingSetup s;
    s.model.kind = model == "conv" ? ddph::ddp::ModelKind::kConvNet : ddph::ddp::ModelKind::kMlp;
    if (s.model.kind == ddph::ddp::ModelKind::kConvNet) s.model.inputs = 2;
    if (inputs > 0) s.model.inputs = inputs;
    s.model.hidden = hidden;
    s.model.outputs = 3;
    s.batchPerRank = batch;
    s.steps = steps;
    s.seed = seed;
    s.optimizer = optimizer == "sgd" ? ddph::ddp::OptimizerKind::kSgdMomentum
                                     : ddph::ddp::OptimizerKind::kAdam;
    s.bucketCapBytes = 256;
    const std::chrono::milliseconds timeout(timeoutMs);
    std::shared_ptr<ddph::comm::RendezvousStore> store;
    std::unique_ptr<ddph::comm::Communicator> comm;
    if (port > 0) {
      store = ddph::comm::makeTcpStore("127.0.0.1", static_cast<std::uint16_t>(port), false, world,
                                       timeout);
      ddph::comm::GlooOptions options = ddph::comm::glooOptionsFromEnvironment();
      options.timeout = timeout;
      comm = ddph::comm::connectGloo(store, rank, world, options, "ddp-multiproc");
    } else {
      ddph::comm::RankWorld joined =
          ddph::comm::initRankWorld(ddph::comm::rankEnvFromEnvironment(), timeout, false,
                                    ddph::comm::glooOptionsFromEnvironment());
      store = joined.store;
      comm = std::move(joined.comm);
      rank = joined.env.rank;
      world = joined.env.worldSize;
    }
    if (killStep >= 0) {
      comm = std::make_unique<ddph::test_support::KillInsideAllreduce>(
          std::move(comm), fmt::format("DDP step {}", killStep), killReport);
    }
    s.worldSize = world;
    const std::vector<double> params = ddph::ddp::trainDdpRank(s, *comm);
    comm->barrier("end of training");
    const std::string tmp = out + ".tmp";
    {
      std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
      f.write(reinterpret_cast<const char*>(params.data()),
              static_cast<std::streamsize>(params.size() * sizeof(double)));
      if (!f) throw ddph::common::Error(fmt::format("cannot write {}", tmp));
    }
    std::filesystem::rename(tmp, out);
    return ddph::common::kExitOk;
  } catch (const ddph::common::ConfigError& e) {
    fmt::print(stderr, "ddp_rank_worker: error: {}\n", e.what());
    return ddph::common::kExitUsage;
  } catch (const std::exception& e) {
    fmt::print(stderr, "ddp_rank_worker: rank {}: {}\n", rank, e.what());
    return ddph::common::kExitViolation;
  }
}
