// The whole core: formats, the environment, the exact operations (one at a
// time and over whole buffers) and the one rounding step.
#pragma once

#include "host/elementwise.hpp"
#include "core/environment.hpp"
#include "core/format.hpp"
#include "core/operations.hpp"
#include "core/round.hpp"
