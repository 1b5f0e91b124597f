#pragma once
// The checks behind auditTrace, one family a file. Each appends what it finds; none throws for
// what a trace says.

#include <string>
#include <vector>

#include "ddph/audit/trace.h"
#include "ddph/verify/property.h"

namespace ddph::audit {

/// rank_checks.cpp: rank-failure (no trace, crashed, killed, hung, raised).
void checkRanks(const Trace& trace, std::vector<Violation>& out);

/// collective_checks.cpp: collective-mismatch (uneven steps, desynchronised collectives).
void checkCollectives(const Trace& trace, std::vector<Violation>& out);

/// data_checks.cpp: the samplers' partitions (coverage, disjointness, reshuffle), what was
/// consumed (coverage), evaluation duplicates (no-duplicates).
void checkData(const Trace& trace, std::vector<Violation>& out, std::vector<std::string>& notes);

/// replica_checks.cpp: replica-consistency and parameter-updates.
void checkReplicas(const Trace& trace, std::vector<Violation>& out);

// --- descriptions shared by the checks (describe.cpp) -------------------------------------------

/// "all_reduce float32[101770] (DDP gradient bucket 0 of backward 12)", "barrier (user call)".
std::string describeCollective(const CollectiveRecord& c);

/// "#17 on the default group", "#3 on group 1".
std::string collectiveNumber(const CollectiveRecord& c);

/// "loader 0 (CustomDataset, 600 samples)".
std::string describeLoader(const RankTrace& t, std::int64_t loader);

/// "epoch 2 step 14 of loader 0 (…)" for the last batch the rank was handed, or "before its first
/// batch".
std::string whereRankStood(const RankTrace& t);

/// "ranks 1, 2, 3" / "rank 1".
std::string rankList(const std::vector<std::int64_t>& ranks);

}  // namespace ddph::audit
