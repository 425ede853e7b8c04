// SPDX-License-Identifier: Apache-2.0
/// @file The reference entry points' one check of their inputs (internal to the reference).
#pragma once

#include <tiebreak/reference/attention.hpp>

namespace tiebreak::reference::detail {

/// Throws reference_error, its message starting with `context`, when the shape is not a problem
/// (attn::shape::validate) or a vector's size disagrees with it (d_o may be empty).
void check_inputs(const attention_inputs& in, const char* context);

}  // namespace tiebreak::reference::detail
