// SPDX-License-Identifier: Apache-2.0
/// @file tiebreak::testing: GoogleTest matchers, exhaustive sweeps and adversarial inputs for testing
/// the rounding of your own kernels (docs/testing.md). Link tiebreak::testing.
///
/// Note: this is namespace tiebreak::testing. After `using namespace tiebreak;` an unqualified
/// `testing::` is ambiguous with GoogleTest's ::testing; write `::testing::` there.
#pragma once

#include "tiebreak/testing/adversarial.hpp"
#include "tiebreak/testing/describe.hpp"
#include "tiebreak/testing/exact.hpp"
#include "tiebreak/testing/matchers.hpp"
#include "tiebreak/testing/stats.hpp"
#include "tiebreak/testing/sweep.hpp"
