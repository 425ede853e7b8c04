// SPDX-License-Identifier: Apache-2.0
/// @file JSON forms of the analysis result structs (nlohmann::json, found by ADL).
#pragma once

#include <tiebreak/analysis/align.hpp>
#include <tiebreak/analysis/bias.hpp>
#include <tiebreak/analysis/drift.hpp>
#include <tiebreak/analysis/spectral.hpp>

#include <tiebreak/io/json.hpp>

#include <nlohmann/json.hpp>

namespace tiebreak::analysis {

/// Non-finite doubles become the strings "inf", "-inf", "nan" (json_number; JSON has no NaN or
/// infinity); angles are written in degrees with a `_deg` suffix; singular vectors are omitted
/// (they belong in .npy files).
void to_json(nlohmann::json& j, const running_moments& m);
void to_json(nlohmann::json& j, const t_test_result& r);
void to_json(nlohmann::json& j, const sign_test_result& r);
void to_json(nlohmann::json& j, const bootstrap_result& r);
void to_json(nlohmann::json& j, const bias_summary& r);
void to_json(nlohmann::json& j, const drift_step& r);
void to_json(nlohmann::json& j, const spectral_norm_result& r);
void to_json(nlohmann::json& j, const spectral_batch_result& r);
void to_json(nlohmann::json& j, const spectrum_summary& r);
void to_json(nlohmann::json& j, const spectral_check& r);
void to_json(nlohmann::json& j, const growth_fit& r);
void to_json(nlohmann::json& j, const growth_step& r);
void to_json(nlohmann::json& j, const principal_angles_result& r);
void to_json(nlohmann::json& j, const subspace_overlap_result& r);
void to_json(nlohmann::json& j, const coherence_result& r);
void to_json(nlohmann::json& j, const gradient_alignment_result& r);
void to_json(nlohmann::json& j, const update_step& r);

/// A double as JSON: the number, or the string "inf", "-inf" or "nan" (the one convention of every
/// tiebreak JSON writer: tiebreak/io/json.hpp, docs/json.md).
using io::json_number;

}  // namespace tiebreak::analysis
