// SPDX-License-Identifier: Apache-2.0
/// @file Umbrella header of the portable core (formats, rounding, random bits, emulated ops, sums, probe events).
#pragma once

#include "tiebreak/fp/config.hpp"
#include "tiebreak/fp/fast.hpp"
#include "tiebreak/fp/format.hpp"
#include "tiebreak/fp/names.hpp"
#include "tiebreak/fp/policy.hpp"
#include "tiebreak/fp/random.hpp"
#include "tiebreak/fp/round.hpp"
#include "tiebreak/fp/value.hpp"
#include "tiebreak/emu/ops.hpp"
#include "tiebreak/emu/sum.hpp"
#include "tiebreak/attn/problem.hpp"
#include "tiebreak/probe/probe.hpp"
