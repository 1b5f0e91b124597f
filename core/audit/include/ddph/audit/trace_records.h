#pragma once
// The trace's records (ddph/trace/trace.h) by their names in the verifier's namespace: every check
// reads them, and ddph::audit's interface takes them (auditTrace(const Trace&)).

#include "ddph/trace/trace.h"

namespace ddph::audit {

using trace::AveragedModelRecord;
using trace::BatchRecord;
using trace::CollectiveRecord;
using trace::DatasetPart;
using trace::DdpRecord;
using trace::EmulationRecord;
using trace::LoggedValue;
using trace::LaunchedRank;
using trace::LaunchRecord;
using trace::LoaderRecord;
using trace::OrderKind;
using trace::ParamsSnapshot;
using trace::PassRecord;
using trace::RankTrace;
using trace::SamplerRecord;
using trace::SeedCall;
using trace::GroupCall;
using trace::SetEpochCall;
using trace::Trace;

}  // namespace ddph::audit
