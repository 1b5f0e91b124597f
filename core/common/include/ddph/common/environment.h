#pragma once
// The environment variables that pass between the launcher (ddp-sim) and the Python side
// (python/ddph_audit, ddph_emulation, ddph_pytest), each spelled once. The Python module
// python/ddph_audit/environment.py names the same ones (AUDIT_DIR for kAuditDir, ...);
// audit_python.environment (python/tests/test_environment.py) fails until the two agree.
// What each one means for a user: docs/audit.md, docs/cpu-emulation.md, docs/multi-node.md.

namespace ddph::common::env {

/// The trace folder: a rank records into it (ddp-sim launch --audit; the C++ TraceWriter too).
inline constexpr const char* kAuditDir = "DDPH_AUDIT_DIR";
/// The run's id, written in every rank's header (one per ddp-sim launch).
inline constexpr const char* kAuditRunId = "DDPH_AUDIT_RUN_ID";
/// The pid of the audited rank that started this process (a DataLoader worker records nothing).
inline constexpr const char* kAuditRankPid = "DDPH_AUDIT_RANK_PID";
/// The pid of an audited process that starts ranks of its own (torch.multiprocessing.spawn).
inline constexpr const char* kAuditSpawner = "DDPH_AUDIT_SPAWNER";
/// Where ddp-sim finds the Python packages (the folder holding ddph_audit), when set.
inline constexpr const char* kAuditPythonPath = "DDPH_AUDIT_PYTHONPATH";
/// --cpu: the CUDA face of torch served by the CPU ("1").
inline constexpr const char* kCpu = "DDPH_CPU";
/// --gpus: how many stand-in CUDA devices a node has.
inline constexpr const char* kCpuGpus = "DDPH_CPU_GPUS";
/// autocast("cuda") under --cpu: "off" (float32, the default) or "bf16".
inline constexpr const char* kCpuAutocast = "DDPH_CPU_AUTOCAST";
/// --stand-in-data: torchvision's downloading datasets served offline ("1").
inline constexpr const char* kStandInData = "DDPH_STAND_IN_DATA";
/// The folder holding the real MNIST files (scripts/fetch-mnist.sh).
inline constexpr const char* kMnistDir = "DDPH_MNIST_DIR";
/// --nnodes: the number of emulated nodes (common to every rank).
inline constexpr const char* kNodes = "DDPH_NODES";
/// The rank's emulated node's loopback address (127.1.0.2).
inline constexpr const char* kNodeAddr = "DDPH_NODE_ADDR";
/// The rank's emulated node's host name ("node1").
inline constexpr const char* kNodeHostname = "DDPH_NODE_HOSTNAME";
/// The ddp-sim the pytest plugin runs its audit with (else ddp-sim on PATH).
inline constexpr const char* kSim = "DDPH_SIM";

}  // namespace ddph::common::env
