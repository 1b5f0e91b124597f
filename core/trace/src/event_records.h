#pragma once
// Private to the reader: each event's own fields read into its record and checked (ConfigError
// naming the field); what needs the rest of the file (positions, declared ids) stays in
// trace_reader.cpp.

#include <nlohmann/json.hpp>

#include "ddph/trace/trace.h"

namespace ddph::trace {

/// The header's fields into `t` (rank, world size, run id, node, …); refuses another format or
/// version, and a rank outside the world.
void readHeader(const nlohmann::json& e, RankTrace& t);

SamplerRecord samplerRecord(const nlohmann::json& e);
LoaderRecord loaderRecord(const nlohmann::json& e);
/// A batch's own fields (its line and time are the reader's).
BatchRecord batchRecord(const nlohmann::json& e);
/// A collective's own fields (its line, time and position in the epochs are the reader's).
CollectiveRecord collectiveRecord(const nlohmann::json& e);

}  // namespace ddph::trace
